"""A sandbox for every process that runs student code: the notebook's kernel during grading, and each check's child.

enter() is called in a process after it forks and before any student code loads. It needs no daemon and no
package: each layer is a system call the kernel offers, and a layer the host lacks is left out (doctor() says which,
and `course grade` records them). The layers, and why these:

- files (Landlock, Linux 5.13+, unprivileged): the process reads only the system's folders, Python and its
  packages, the installed `course` package, the build folder and what its caller names; it writes only its own
  scratch folder (HOME, TMPDIR and every cache point there) and what its caller names, never the course folder
  (`source/`'s hidden seeds, `.grading_secret`, `gradebook.db`, the submissions) and never the shared build folder
  (the course's and other students' compiled modules). Symbolic links can be made in the scratch folder alone, and
  no file can be linked or moved in from elsewhere, so nothing the process leaves can point the grader at a file.
  Landlock rules follow the process across fork and exec and cannot be undone; a bind mount namespace would need
  root, and bubblewrap a package and a setuid helper.
- network: Landlock (ABI 4+) refuses every TCP bind and connect, and a seccomp filter refuses to open any socket
  but a Unix one (the kernel's ZeroMQ sockets are Unix sockets) and io_uring (which could open one behind it).
- signals (Landlock ABI 6+): the process cannot signal, or reach through an abstract Unix socket, any process
  outside its sandbox: not the grader, not another student's sandbox.
- a user of its own (where the grader runs as root): the process becomes uid/gid UID_BASE + its pid, keeping only
  the right to bypass file permissions (which Landlock then bounds), so that RLIMIT_NPROC, from which uid 0 is exempt,
  bounds a fork bomb, and every process it started can be found and killed by its uid (sweep()) when it ends,
  however it detached itself. Not root, the process keeps its user, and a fork bomb is bounded by nothing but
  the check's time limit.
- a group of its own (cgroups, where the grader runs as root and the host lets it make one): the sandbox's processes
  together get at most TASKS processes and threads (pids) and half the machine's memory (memory, page tables
  included). RLIMIT_NPROC counts a user's processes, not what each costs: a fork bomb of 2,000 copies of a process
  that had imported torch (620 MB each, shared until written, and 2.4 MB of page tables each in the kernel's report)
  ran the 24 GB CI machine out of memory and its pytest worker past its time limit. The group bounds them together;
  the kernel's OOM killer then picks inside it.
- limits: processes and threads (RLIMIT_NPROC), file size (RLIMIT_FSIZE), processor seconds (RLIMIT_CPU), no core
  files, and in CPU mode memory (RLIMIT_DATA: CUDA's large reservations break RLIMIT_AS, so no memory limit on a GPU;
  the group's memory limit counts pages in use, not reservations, so it should hold on a GPU too: not tried there yet).

The grader's own processes (the judge, nbgrader's, the check server) stay outside; a process entered stays inside.
"""
import ctypes
import os
import platform
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path

UID_BASE = 1 << 30  # sandboxed processes' users: UID_BASE + pid, unused by any account
NPROC = 2048  # processes and threads of one sandbox's user: a block of blk_kernel2d_shar is up to 1,024 Python threads, besides
# torch's thread pools, the kernel's and a build's compilers (256 failed a right tiled answer)
FSIZE = 2 << 30  # bytes one file may grow to
CPU = 1800  # processor seconds of one process
KERNEL_CPU = 3600  # processor seconds of a notebook's kernel: every cell of the notebook
DATA = 16 << 30  # bytes of memory one process may allocate, in CPU mode
TASKS = NPROC  # processes and threads of one sandbox's group, all its users' together
CGROUPS = "/sys/fs/cgroup"
INSIDE = "COURSE_IN_SANDBOX"  # set in a sandboxed process's environment: its children inherit its sandbox

_libc = ctypes.CDLL(None, use_errno=True)

# ---- Landlock (linux/landlock.h) ----------------------------------------------------------------------------------
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
_VERSION = 1  # LANDLOCK_CREATE_RULESET_VERSION
(EXECUTE, WRITE_FILE, READ_FILE, READ_DIR, REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK,
 MAKE_FIFO, MAKE_BLOCK, MAKE_SYM, REFER, TRUNCATE, IOCTL_DEV) = (1 << i for i in range(16))
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a file (not a folder) may allow
READ = EXECUTE | READ_FILE | READ_DIR
WRITE = READ | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | TRUNCATE | IOCTL_DEV
SCRATCH = WRITE | MAKE_SOCK | MAKE_FIFO | MAKE_SYM | REFER
SOCKETS = READ | MAKE_SOCK | REMOVE_FILE  # a folder where the process binds its Unix sockets (the kernel's ZeroMQ)
DEVICES = READ_FILE | READ_DIR | WRITE_FILE | TRUNCATE | IOCTL_DEV  # the GPU's device files are opened read-write
# CUDA names its threads (fopen of /proc/self/task/TID/comm, "wb"); refused, its driver fails to start (error 304,
# measured on the H100 host, 2026-12-06). The rule binds this process's own task folder: its own threads, no other's
OWN_THREADS = READ | WRITE_FILE | TRUNCATE
_NET_TCP = 1 | 2  # LANDLOCK_ACCESS_NET_BIND_TCP | CONNECT_TCP (ABI 4)
_SCOPES = 1 | 2  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | SIGNAL (ABI 6)


def landlock_abi():
    """The Landlock ABI version this kernel offers (0: none, or turned off)."""
    abi = _libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    return max(0, abi)


def _landlock(abi, readable, writable, scratch):
    """Restricts this thread (and what it starts) to the paths given; returns the layers it set."""
    handled = _FS_BY_ABI.get(abi, _FS_BY_ABI[5])
    attr = struct.pack("QQQ", handled, _NET_TCP if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = _libc.syscall(_CREATE_RULESET, buf, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        rules = [(p, READ) for p in readable] + [("/dev", DEVICES), ("/dev/shm", WRITE), ("/proc/self/task", OWN_THREADS)] + \
            [p if isinstance(p, tuple) else (p, WRITE) for p in writable] + [(scratch, SCRATCH)]
        for path, access in rules:
            try:
                target = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path this host lacks
            try:
                if not os.path.isdir(f"/proc/self/fd/{target}"):
                    access &= _FILE_ONLY
                rule = struct.pack("=Qi", access & handled, target)
                if _libc.syscall(_ADD_RULE, fd, ctypes.c_int(1), ctypes.create_string_buffer(rule, len(rule)),
                                 ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(target)
        if _libc.syscall(_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)
    return ["files"] + (["network"] if abi >= 4 else []) + (["signals"] if abi >= 6 else [])


# ---- seccomp: no socket but a Unix one -----------------------------------------------------------------------------
_ARCH = {"x86_64": (0xC000003E, 41, 425, 317), "aarch64": (0xC00000B7, 198, 425, 277)}  # audit arch, socket, io_uring_setup, seccomp


def _bpf(code, k, jt=0, jf=0):
    return struct.pack("=HBBI", code, jt, jf, k)


def _seccomp():
    """Installs, on every thread of this process, a filter that refuses socket() for any family but AF_UNIX and
    AF_NETLINK (which ZeroMQ asks the network's interfaces through; without CAP_NET_ADMIN it changes nothing)."""
    arch = _ARCH.get(platform.machine())
    if arch is None:
        raise OSError(f"no seccomp filter for {platform.machine()}")
    audit, sock, uring, nr_seccomp = arch
    LD, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
    ALLOW, ERRNO, KILL = 0x7FFF0000, 0x00050000, 0x80000000
    prog = [
        _bpf(LD, 4), _bpf(JEQ, audit, 1, 0), _bpf(RET, KILL),        # another architecture's calls: none
        _bpf(LD, 0), _bpf(JGE, 0x40000000, 0, 1), _bpf(RET, KILL),   # x32's numbering: none
        _bpf(JEQ, uring, 0, 1), _bpf(RET, ERRNO | 38),               # io_uring_setup: ENOSYS
        _bpf(JEQ, sock, 0, 4), _bpf(LD, 16), _bpf(JEQ, 1, 2, 0),     # socket(AF_UNIX, ...)?
        _bpf(JEQ, 16, 1, 0),                                         # or AF_NETLINK (getifaddrs(), read-only here)
        _bpf(RET, ERRNO | 13),                                       # any other family: EACCES
        _bpf(RET, ALLOW),
    ]
    filt = ctypes.create_string_buffer(b"".join(prog))
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(filt))
    if _libc.syscall(nr_seccomp, 1, 1, ctypes.create_string_buffer(fprog, len(fprog))) != 0:  # SET_MODE_FILTER, TSYNC
        raise OSError(ctypes.get_errno(), "seccomp")


# ---- a user of its own ---------------------------------------------------------------------------------------------
_CAPSET = {"x86_64": 126, "aarch64": 91}
_DAC = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH: file permissions are Landlock's to decide


def _become(uid):
    """Switches this process to uid (and gid uid), keeping only the right to bypass file permissions."""
    _libc.prctl(8, 1, 0, 0, 0)  # PR_SET_KEEPCAPS: the permitted set survives the switch
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = struct.pack("6I", _DAC, _DAC, _DAC, 0, 0, 0)  # effective, permitted, inheritable (low and high words)
    if _libc.syscall(_CAPSET[platform.machine()], ctypes.create_string_buffer(header, 8),
                     ctypes.create_string_buffer(data, 24)) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    for cap in (1, 2):  # ambient: the compilers a build runs keep them too
        _libc.prctl(47, 2, cap, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE


# ---- a group of its own (cgroups v1 or v2) --------------------------------------------------------------------------

def memory_bound():
    """The memory one sandbox's processes may hold together: half the machine's, at least 2 GB (a quarter, 6 GB in CI,
    stopped a notebook's kernel whose checks' one-thread contract grew it to 6.4 GB, 2026-12-05)."""
    page = os.sysconf("SC_PAGE_SIZE")  # in whole pages: the kernel rounds a limit down to them (an odd count of pages)
    return max(2 << 30, os.sysconf("SC_PHYS_PAGES") // 2 * page)


def _own_groups():
    """{controller: the folder of this process's group} for pids and memory, from /proc/self/cgroup and the mounts."""
    found = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, names, path = line.split(":", 2)
        for name in ("pids", "memory"):
            if name in names.split(","):  # v1: a hierarchy of its own
                found[name] = os.path.join(CGROUPS, name, path.lstrip("/"))
        if names == "":  # v2: one hierarchy, its controllers listed in each folder
            for top in (CGROUPS, os.path.join(CGROUPS, "unified")):
                folder = os.path.join(top, path.lstrip("/"))
                try:
                    offered = Path(folder, "cgroup.subtree_control").read_text().split()
                except OSError:
                    continue
                for name in ("pids", "memory"):
                    if name in offered:
                        found.setdefault(name, folder)
    return found


def group_folders(uid):
    """The folders of a sandbox's group (one per controller), named by its user."""
    return [os.path.join(folder, f"course-sandbox-{uid}") for folder in _own_groups().values()]


def _join_group(uid):
    """Makes the sandbox's group, bounds it (TASKS, memory_bound()) and moves this process into it. Returns whether
    both bounds hold: a controller the host does not offer, or will not let root write, leaves the layer out."""
    limits = {"pids": ("pids.max", TASKS), "memory": ("memory.limit_in_bytes", memory_bound())}
    groups, bounded = _own_groups(), set()
    for name, parent in groups.items():
        folder = os.path.join(parent, f"course-sandbox-{uid}")
        files = [limits[name][0]]
        if name == "memory" and not os.path.exists(os.path.join(parent, "memory.limit_in_bytes")):
            files = ["memory.max"]  # v2
        try:
            os.makedirs(folder, exist_ok=True)
            for f in files:
                Path(folder, f).write_text(str(limits[name][1]))
            Path(folder, "cgroup.procs").write_text(str(os.getpid()))
            bounded.add(name)
        except OSError:
            continue
    return bounded == set(limits)


def _leave_groups(uid):
    """Removes a sandbox's group folders once its processes are gone (an empty group is removed by rmdir)."""
    for folder in group_folders(uid):
        for _ in range(50):
            try:
                os.rmdir(folder)
                break
            except FileNotFoundError:
                break
            except OSError:  # EBUSY: a process killed a moment ago is still leaving
                time.sleep(0.01)


# ---- the paths every sandboxed process reads ----------------------------------------------------------------------
SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/run/nvidia-persistenced")


def readable_paths():
    """What any sandboxed process may read and run: the system, Python and its packages, the course package, the
    CUDA toolkit and the grader's build folder (read-only)."""
    import site
    import sysconfig
    from course.toolchain.toolkit import build_root
    paths = [*SYSTEM, sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             *site.getsitepackages(), *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
             str(Path(__file__).resolve().parent), str(build_root()), os.environ.get("COURSE_BUILD_SHARED")]
    paths += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)] + [triton_cache()]
    # packages installed beside the system's (the GPU host's pip --target folder), never a course folder on the path
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if p and os.path.isdir(p) and not os.path.exists(os.path.join(p, "nbgrader_config.py"))]
    paths += os.environ.get("COURSE_SANDBOX_READ", "").split(os.pathsep)  # a test's own modules, as its loader
    return [p for p in dict.fromkeys(paths) if p and os.path.exists(p)]


CACHES = ("HOME", "TMPDIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MPLCONFIGDIR", "IPYTHONDIR",
          "JUPYTER_RUNTIME_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "TORCH_EXTENSIONS_DIR")


def triton_cache():
    """The grader's Triton cache: $TRITON_CACHE_DIR, else Triton's default under HOME."""
    return os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")


def point_caches(scratch):
    """Points HOME, TMPDIR and every cache a sandboxed process writes at its scratch folder. Triton's cache there
    links to each kernel the grader's cache holds (read-only), so a kernel compiled before is not compiled again."""
    shared = triton_cache()
    for name in CACHES:
        path = os.path.join(scratch, name.lower())
        os.makedirs(path, exist_ok=True)
        os.environ[name] = path
    os.environ["HOME"] = scratch
    tempfile.tempdir = None  # read TMPDIR again
    mine = os.environ["TRITON_CACHE_DIR"]
    if os.path.isdir(shared) and os.path.realpath(shared) != os.path.realpath(mine):
        for entry in os.listdir(shared):
            if not os.path.lexists(os.path.join(mine, entry)):
                os.symlink(os.path.join(shared, entry), os.path.join(mine, entry))


# ---- entering ------------------------------------------------------------------------------------------------------

def enter(scratch, readable=(), writable=(), cpu_seconds=CPU, memory=None):
    """Confines this process (call it single-threaded, after fork, before student code loads): it reads only the
    system, Python, the course package, the build folder and readable, writes only scratch and writable (paths, or
    (path, Landlock rights) pairs), opens no
    network socket, signals nothing outside, and, where it runs as root, becomes a user of its own with its limits.
    Calling it again narrows further. Returns the layers it set (layers() names them all)."""
    from course.toolchain.toolkit import SHARED, build_root
    try:  # a Landlock rule needs its folder: the grader's build folder is made while this process still may
        build_root().mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    readable = [*readable_paths(), *readable]
    set_ = []
    os.environ[INSIDE] = "1"
    scratch = os.path.realpath(scratch)
    # the grader's build folder is read through; what the process builds goes into its own (toolkit.kept)
    os.environ[SHARED] = os.environ.get(SHARED) or str(build_root())
    os.environ["COURSE_BUILD_DIR"] = os.path.join(scratch, "build")
    os.makedirs(scratch, exist_ok=True)
    trace = os.environ.get("COURSE_TRACE")  # the grading benchmark's trace file: every process appends to it
    if trace:
        writable = [*writable, (trace, WRITE_FILE)]
    if os.geteuid() == 0:
        uid = UID_BASE + os.getpid()
        os.chown(scratch, uid, uid)
        if _join_group(uid):
            set_.append("group")
        _become(uid)
        set_.append("user")
    point_caches(scratch)
    for name, value in ((resource.RLIMIT_NPROC, NPROC if "user" in set_ else None), (resource.RLIMIT_FSIZE, FSIZE),
                        (resource.RLIMIT_CPU, cpu_seconds), (resource.RLIMIT_CORE, 0), (resource.RLIMIT_DATA, memory)):
        if value is not None:
            hard = resource.getrlimit(name)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(name, (value, value))
    set_.append("limits")
    _libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: nothing it runs gains rights (Landlock and seccomp need it)
    abi = landlock_abi()
    if abi:
        set_ += _landlock(abi, readable, list(writable), scratch)
    try:
        _seccomp()
        set_.append("sockets")
    except OSError:
        pass
    os.umask(0o022)
    _entered.update(set_)
    return set_


_entered = set()  # the layers this process entered (enter())


def end_started():
    """Inside a sandbox, as its process's work ends: kills every process it started, however it detached itself (a
    session of its own, its parent gone), where a signal to all reaches only the sandbox's own processes: a user of
    its own, or Landlock's signal scope. compute-sanitizer waits for every process its child started: a daemon left
    running held a memory check until its time limit (frank, on the H100 host)."""
    if {"user", "signals"} & _entered:
        try:
            os.kill(-1, signal.SIGKILL)  # Linux: never the caller itself
        except ProcessLookupError:
            pass


def enter_build(folder, memory=None):
    """Enters the sandbox of a process that builds a student's source (folder: its sandbox folder): the compilers
    write the grader's build folder (its objects and headers are shared, and no student code runs in a compiler),
    and the process narrows to its own folder just before it imports the module built, whose static initializers
    are the student's code. Its environment keeps the grader's build folder as the one it builds into."""
    from course.toolchain import build_root, objects
    from course.toolchain.toolkit import SHARED
    shared = str(build_root())
    home, io = Path(folder) / "home", Path(folder) / "io"
    enter(home, writable=[io, shared], memory=memory)
    os.environ["COURSE_BUILD_DIR"] = shared
    os.environ.pop(SHARED, None)
    load = objects.import_module

    def narrowed(name, path):
        objects.import_module = load
        enter(home, writable=[io], memory=memory)
        return load(name, path)
    objects.import_module = narrowed


# ---- what the host offers, for doctor and for grading's record -----------------------------------------------------

LAYERS = {
    "files": "Landlock: student code reads only the system, Python, the course package and the build folder, and "
             "writes only its own scratch folder",
    "network": "Landlock ABI 4: no TCP connection in or out",
    "signals": "Landlock ABI 6: no signal to a process outside the sandbox",
    "sockets": "seccomp: no socket but a Unix (or netlink) one",
    "user": "a user of its own: a fork bomb is bounded (RLIMIT_NPROC) and every process it started is killed after",
    "group": f"cgroups: the sandbox's processes together hold at most {TASKS:,} processes and threads and half the "
             "machine's memory",
    "limits": "limits on file size and processor time (and memory in CPU mode)",
}

MISSING = {
    "files": "student code reads and writes what the grader can (.grading_secret, source/'s hidden seeds, "
             "gradebook.db, the build folder); grading goes on without this layer. Fix: Linux 5.13+ with Landlock "
             "in the lsm= boot list",
    "network": "student code can reach the network over TCP where seccomp is missing too; grading goes on. Fix: "
               "Linux 6.7+ (Landlock ABI 4)",
    "signals": "student code can signal the grader's processes of its own user; grading goes on. Fix: Linux 6.12+ "
               "(Landlock ABI 6)",
    "sockets": "student code can open network sockets (UDP, and TCP where Landlock's network layer is missing too); "
               "grading goes on",
    "group": "a sandbox's processes are bounded one by one, not together: a fork bomb of large processes can take the "
             "machine's memory (each copy's page tables) before RLIMIT_NPROC stops it; grading goes on. Fix: run as "
             "root where /sys/fs/cgroup offers the pids and memory controllers (cgroups v1, or v2 with them delegated)",
    "user": "not run as root: sandboxed processes keep the grader's user, so a fork bomb is bounded only by the "
            "check's time limit, and a process that detached itself outlives its check; grading goes on",
}


def layers():
    """{layer: whether a sandboxed process gets it on this host}, found by entering a sandbox in a child."""
    r, w = os.pipe()
    folder = tempfile.mkdtemp(prefix="course-sandbox-probe-")
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            got = enter(folder)
        except Exception:  # noqa: B902 (whatever failed: the layers it set are none)
            got = []
        os.write(w, " ".join(got).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = f.read().split()
    os.waitpid(pid, 0)
    if os.geteuid() == 0:
        _leave_groups(UID_BASE + pid)
    shutil.rmtree(folder, ignore_errors=True)
    return {name: name in got for name in LAYERS}


def record():
    """What `course grade` records of the sandbox its student code ran in: {layer: whether it had it}, {} when off."""
    return layers() if wanted() else {}


# ---- starting and ending sandboxed processes -----------------------------------------------------------------------

def base():
    """The folder sandboxes' own folders are made in: $COURSE_SANDBOX_DIR, else the system's temporary folder; inside
    a sandbox, its own temporary folder (it writes nowhere else)."""
    inside = os.environ.get(INSIDE) == "1"
    path = Path(tempfile.gettempdir() if inside else os.environ.get("COURSE_SANDBOX_DIR") or "/tmp") / "course-sandboxes"
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_folder(prefix="course-sandbox-"):
    """A fresh folder for one sandbox: its scratch (home/) and the files it reads and writes (io/)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base()))
    folder.chmod(0o711)  # its user's tools check their folders with access(), which the rights it keeps do not pass
    (folder / "home").mkdir()
    (folder / "io").mkdir()
    (folder / "io").chmod(0o777)
    return folder


def user_of(folder):
    """The user a sandbox's process became (its scratch folder's owner), or None where it kept the grader's."""
    try:
        uid = os.stat(Path(folder) / "home").st_uid
    except OSError:
        return None
    return uid if uid >= UID_BASE else None


def process_status(pid):
    """A process's /proc status as {field: value}, None once it has ended."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    except OSError:
        return None


def _of(fields, uid):
    """Whether a status is a live process's (zombies left out: dead, waiting to be reaped) whose real user is uid."""
    return fields is not None and str(uid) in fields.get("Uid", "").split()[:1] and \
        not fields.get("State", "").strip().startswith("Z")


def processes_of(uid):
    """The pids of a user's live processes. Read from each process's status: a process that changed its user is not
    dumpable, and its /proc folder belongs to root."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and _of(process_status(e), uid)]


def _kill(pid, uid):
    """SIGKILL to pid while it is a process of uid: through a pidfd, so never a process that took its number since (pids
    wrap: a fork bomb's thousands of processes go through a 32,768-pid host in a few checks)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        if _of(process_status(pid), uid):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


SWEEP = 60  # seconds sweep() waits for a sandbox's processes to be gone: a killed process on a host short of memory
# takes a while to exit (a fork bomb's copies of a torch process give back gigabytes of page tables)


def sweep(uid, seconds=SWEEP):
    """Kills every process of a sandbox's user, however it detached itself, and waits until none is left (it forks while
    being killed: a fork bomb, a daemon's double fork). Whether none is left; the grader's own signals, never a shell
    run as that user (which a host out of processes or memory cannot start: what it left then ran on)."""
    if uid is None or uid < UID_BASE or os.geteuid() != 0:
        return True
    deadline = time.monotonic() + seconds
    while True:
        left = processes_of(uid)
        if not left:
            return True
        if time.monotonic() > deadline:
            print(f"course.sandbox: {len(left)} process(es) of sandbox user {uid} still there after {seconds} s: "
                  f"{left[:10]}", file=sys.stderr)
            return False
        for pid in left:
            _kill(pid, uid)
        time.sleep(0.005)


def copy_out(src, dst, limit=FSIZE):
    """Copies a sandbox's output file to dst, refusing a link or anything but a plain file (a sandbox's files are read
    as the grader: none may point elsewhere). True when copied."""
    if os.path.isdir(src) and not os.path.islink(src):  # an output folder: its plain files, one level
        os.makedirs(dst, exist_ok=True)
        return all([copy_out(os.path.join(src, n), os.path.join(dst, n), limit) for n in os.listdir(src)])
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not (info.st_mode & 0o170000 == 0o100000) or info.st_size > limit:
            return False
        with os.fdopen(os.dup(fd), "rb") as f, open(dst, "wb") as out:
            shutil.copyfileobj(f, out)
        return True
    finally:
        os.close(fd)


def children_reach_gpu():
    """Whether a process this one starts may use CUDA: not inside a sandbox on a GPU host. CUDA's driver names its
    threads through /proc/PID/task, and the sandbox's rule for that (OWN_THREADS) binds the process that entered it:
    a process it starts later is refused, and its CUDA fails to start (error 304, H100 host)."""
    return os.environ.get(INSIDE) != "1" or _cpu()


def wanted():
    """Whether checks and kernels run sandboxed: yes unless COURSE_SANDBOX=0, on a GPU host as in CPU mode (grayscale's
    examples got the same marks with it and without on the H100 host, 2026-12-06). `course grade` records it."""
    if os.environ.get(INSIDE) == "1":
        return False  # already inside one (the notebook's kernel): its children stay in it, which writes nowhere else
    return os.environ.get("COURSE_SANDBOX", "").strip() != "0"


def _clear(path):
    """Removes what a sandbox may have left at path (a file, a folder, a pipe that would block a writer)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def write_in(path, data):
    """Writes data into a new file at path in a sandbox's folder, whatever the sandbox left there."""
    _clear(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def stage(args, io):
    """A child's arguments as it sees them in its sandbox: each file (or folder) the caller wrote is copied into io,
    each one the child is to write is named in io. Returns (the new arguments, [(io path, where to copy it back)])."""
    new, outputs = [], []
    for arg in map(str, args):
        path, inside = Path(arg), str(Path(io) / Path(arg).name)
        if not path.is_absolute() or not (path.exists() or path.parent.is_dir()):
            new.append(arg)
            continue
        if path.is_file():
            write_in(inside, path.read_bytes())
        elif path.is_dir():
            _clear(inside)
            shutil.copytree(path, inside)
        else:
            _clear(inside)
            outputs.append((inside, arg))
        new.append(inside)
    return new, outputs


def end(folder):
    """After a sandbox's process ended: kills what it left running and removes its folder and its group."""
    uid = user_of(folder)
    sweep(uid)
    if uid is not None:
        _leave_groups(uid)
    shutil.rmtree(folder, ignore_errors=True)


def end_all(path=None):
    """Ends every sandbox made under path (default: base()), and what each left running: for a grading run that
    gives its sandboxes a folder of its own (COURSE_SANDBOX_DIR), however its workers were stopped."""
    path = Path(path) if path else base()
    for folder in sorted(path.glob("course-*")):
        end(folder)


def supervise(folder, readable, writable, run, cpu_seconds=CPU, memory=None):
    """Runs run() in a forked child entered into a sandbox (this process may have threads: the child has one), passes
    this process's signals on to it, then kills what it left running and exits with its status (never returns)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            enter(Path(folder) / "home", readable, writable, cpu_seconds, memory)
            _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (after the switch, which clears it)
            if os.getppid() == 1:
                os._exit(1)
            run()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        except BaseException:  # noqa: B902
            import traceback
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, forward)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.geteuid() == 0:
        sweep(UID_BASE + pid)
        _leave_groups(UID_BASE + pid)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def main(argv):
    """`python -m course.sandbox FOLDER [--read PATH]... [--write PATH]... [--sockets PATH]... -- -m MODULE ARGS...`:
    runs a module in a sandbox whose scratch is FOLDER/home and which reads its working folder too (the notebook's
    kernel during grading, in the notebook's folder)."""
    folder, rest = argv[0], argv[1:]
    split = rest.index("--")
    opts, command = rest[:split], rest[split + 1:]
    readable = [os.getcwd()] + [opts[i + 1] for i, o in enumerate(opts) if o == "--read"]
    writable = [opts[i + 1] for i, o in enumerate(opts) if o == "--write"] + \
        [(opts[i + 1], SOCKETS) for i, o in enumerate(opts) if o == "--sockets"]
    memory = memory_limit()
    if command[:1] != ["-m"]:
        raise SystemExit("usage: python -m course.sandbox FOLDER [--read P] [--write P] -- -m MODULE ARGS...")
    module, args = command[1], command[2:]

    def run():
        import runpy
        if module == "ipykernel_launcher" and "ipykernel" in sys.modules and os.environ.get("JPY_PARENT_PID"):
            # forked warm (course/grading/warm.py): ipykernel read JPY_PARENT_PID before the fork; give it this one's
            args.append(f"--IPKernelApp.parent_handle={os.environ['JPY_PARENT_PID']}")
        if module == "ipykernel_launcher":  # its pipe for forked processes' output is TCP, which the sandbox refuses
            import warnings
            warnings.filterwarnings("ignore", message="Couldn't bind IOPub Pipe")
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    supervise(folder, readable, writable, run, cpu_seconds=KERNEL_CPU, memory=memory)


def _cpu():
    """CPU mode, read without torch: asking torch for the GPU initializes CUDA's driver, after which no forked child
    can use CUDA."""
    return os.environ.get("COURSE_CPU_MODE", "").strip() == "1" or not any(Path("/dev").glob("nvidia[0-9]*"))


def memory_limit():
    """The memory limit of a sandboxed process: DATA in CPU mode, none on a GPU (CUDA's reservations)."""
    return DATA if _cpu() else None


if __name__ == "__main__":
    main(sys.argv[1:])

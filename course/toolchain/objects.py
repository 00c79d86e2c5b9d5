"""The compile steps of load_cuda's builds: object files cached by what they are made of, precompiled headers
built in the background, the link and the import.

Every object file is named after a hash of its compiler, flags and source text, and kept in
<build root>/objects: a unit that did not change is not compiled again, whichever module it goes into (a
student's next edit, the next student's submission with the same wrapper). Objects are written under a
temporary name and renamed, so builds running at the same time (threads, processes) find a whole file
or none.
"""
import hashlib
import importlib.util
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .toolkit import kept

_versions = {}


def compiler_version(compiler):
    """The first line `compiler --version` prints (part of every cache key), once per process."""
    if compiler not in _versions:
        try:
            out = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
        except OSError:
            out = ""
        _versions[compiler] = " ".join(out.split("\n")[:4])
    return _versions[compiler]


def digest(*parts):
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def signature(compiler, *more):
    """A short hash of what a build depends on besides the sources: the compiler, more, every file of course/toolchain."""
    files = [p.read_text() for p in sorted(Path(__file__).parent.iterdir()) if p.suffix in (".py", ".h", ".cpp")]
    return digest(compiler_version(compiler), *more, *files)[:12]


@dataclass
class Job:
    """One object file to compile: `label` names it in timings and messages."""
    label: str
    command: list          # compiler and flags, without the source and -c/-o
    text: str              # the source
    suffix: str            # ".cu" or ".cpp"
    key_text: str = None   # what the cache key hashes instead of text (line numbers left out)
    depends: str = ""      # what else the object depends on: included headers' text
    locate: dict = field(default_factory=dict)  # file label -> locate(line, col) for compiler messages
    obj: Path = None
    seconds: float = 0.0
    cached: bool = False
    output: str = ""


def object_path(root, job):
    key = digest(compiler_version(job.command[0]), *job.command, job.key_text if job.key_text is not None else job.text,
                 job.depends)
    stem = re.sub(r"\W+", "_", job.label.split()[0])
    return Path(root) / "objects" / f"{stem}-{key[:24]}.o"


def failure_path(root, job):
    """Where the compiler's errors for this job's exact text are kept (its line numbers are in them)."""
    key = digest(compiler_version(job.command[0]), *job.command, job.text, job.depends)
    return Path(root) / "objects" / f"failed-{key[:24]}.txt"


def _write(path, text):
    """Writes text to path unless it holds it already (atomically)."""
    path = Path(path)
    if path.exists() and path.read_text() == text:
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


# an error on a line of the student's source; not a compiler that could not run or a full disk, which may pass next time
_STUDENT_ERROR = re.compile(r"^(cuda_src|cpp_src|funcs)[(:]\d+.*\berror\b", re.M)


class BuildFailed(Exception):
    """Some jobs did not compile: .jobs holds them, each with the compiler's output."""

    def __init__(self, jobs):
        super().__init__("\n".join(j.output for j in jobs))
        self.jobs = jobs


def compile_all(root, jobs, verbose=False, env=None):
    """Compiles the jobs whose object is not cached yet, all at once; sets each job's obj, seconds and cached."""
    folder = Path(root) / "objects"
    folder.mkdir(parents=True, exist_ok=True)
    running = []
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    known = []  # jobs whose source failed before: the compiler's errors again, without compiling
    for job in jobs:
        job.obj = kept(root, object_path(root, job).relative_to(root))
        if job.obj.exists():
            job.cached = True
            continue
        if failure_path(root, job).exists():
            job.output, job.seconds = failure_path(root, job).read_text(), 0.0
            known.append(job)
            continue
        source = job.obj.with_suffix(job.suffix)
        _write(source, job.text)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=job.obj.stem + ".", suffix=".o.tmp")
        os.close(fd)
        cmd = [*job.command, "-c", str(source), "-o", tmp]
        if verbose:
            print(" ".join(cmd), flush=True)
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder,
                                    env=env)
        except OSError as e:
            os.unlink(tmp)
            for _, t, p, _ in running:
                p.kill()
            job.not_started = True
            raise BuildFailed([_failed(job, f"{cmd[0]} could not be run: {e}")]) from None
        running.append((job, tmp, proc, time.perf_counter()))
    failed = known
    for job, tmp, proc, started in running:
        job.output, _ = proc.communicate()
        job.seconds = time.perf_counter() - started
        if proc.returncode == 0:
            os.chmod(tmp, 0o644)
            os.replace(tmp, job.obj)
        else:
            Path(tmp).unlink(missing_ok=True)  # g++ removes the output of a failed compile itself
            failed.append(job)
            if _STUDENT_ERROR.search(job.output):  # the same text fails the same way: every later check says so at once
                _write(failure_path(root, job), job.output)
        if verbose and job.output:
            print(job.output, flush=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    global last_cpu_seconds
    last_cpu_seconds = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    if failed:
        raise BuildFailed(failed)
    return jobs


last_cpu_seconds = 0.0  # the processor time the last compile_all's compilers used (all of them, in this process)


def _failed(job, output):
    job.output = output
    return job


def gold():
    """True where the gold linker is installed: it links a module against torch's libraries 2-3 times faster
    (CPU mode uses it; COURSE_LINKER=bfd turns it off)."""
    return os.environ.get("COURSE_LINKER", "gold") == "gold" and shutil.which("ld.gold") is not None


def link(objects, path, ldflags, name, binding, fast=False):
    """Links objects into the module file path; PyInit_<name> is the binding's PyInit_<binding> under the module's name.

    fast: with the gold linker where there is one."""
    compiler = os.environ.get("CXX") or "c++"
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=Path(path).name + ".", suffix=".tmp")
    os.close(fd)
    t = time.perf_counter()
    for linker in (["-fuse-ld=gold"], []) if fast and gold() else ([],):  # gold where it works, else the default
        cmd = [compiler, *linker, *map(str, objects), "-shared", *ldflags,
               f"-Wl,--defsym=PyInit_{name}=PyInit_{binding}", "-Wl,-Bsymbolic", "-o", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            break
    if proc.returncode != 0:
        Path(tmp).unlink(missing_ok=True)  # the compiler removes a failed output itself
        raise RuntimeError(f"linking the module failed:\n{proc.stdout}{proc.stderr}")
    os.chmod(tmp, 0o755)
    _write(linked_record(path), json.dumps({"objects": [str(o) for o in objects]}))
    os.replace(tmp, path)
    return time.perf_counter() - t


def linked_record(path):
    """Where link() notes which object files a module was linked from (the integrity check reads their symbols)."""
    return Path(path).with_suffix(".objects.json")


def linked(path):
    """The object files a module (its file) was linked from, by role: {"wrapper": [...], "kernel": [...], ...} (a
    one-unit build's is "kernel+wrapper"); None when the module's record is missing or names no object that exists."""
    try:
        names = json.loads(linked_record(path).read_text())["objects"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    roles = {}
    for name in names if isinstance(names, list) else []:
        found = re.fullmatch(r"(wrapper|kernel|kernel_wrapper|binding|runtime)-[0-9a-f]{24}\.o", Path(str(name)).name)
        if found is None or not Path(name).is_file():
            return None
        roles.setdefault(found.group(1).replace("_", "+"), []).append(str(name))
    return roles or None


def symbols(obj):
    """(defined, undefined) symbol names of an object file, demangled (nm -C); None when nm cannot read it."""
    try:
        out = subprocess.run(["nm", "-C", str(obj)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    defined, undefined = set(), set()
    for line in out.stdout.splitlines():
        found = re.match(r"^\s*(?:[0-9a-fA-F]+\s+)?([A-Za-z])\s+(.+)$", line)
        if found:
            (undefined if found.group(1) == "U" else defined).add(found.group(2))
    return defined, undefined


def import_module(name, path):
    """Imports the compiled module at path under name."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


# ---- precompiled headers ----------------------------------------------------------------------------

# Run detached: compiles the header, renames the result into place, removes the lock. Nothing of it reaches
# the notebook (nbgrader zeroes a cell that writes to stderr).
_PCH_SCRIPT = r"""
import json, os, subprocess, sys, time
job = json.loads(sys.argv[1])
t = time.time()
tmp = job["gch"] + ".%d.tmp" % os.getpid()
try:
    ok = subprocess.run(job["cmd"] + ["-o", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        cwd=job["dir"]).returncode == 0
    if ok:
        os.replace(tmp, job["gch"])
        with open(job["gch"] + ".json", "w") as f:
            json.dump({"seconds": time.time() - t}, f)
    else:
        open(job["gch"] + ".failed", "w").close()
except OSError:
    pass
finally:
    for p in (tmp, job["lock"]):
        try:
            os.unlink(p)
        except OSError:
            pass
"""
_STALE_LOCK = 900  # seconds after which a lock is taken for a build that died


def pch_enabled():
    return os.environ.get("COURSE_PCH", "1").strip() != "0"


def precompiled(root, name, header, command, depends=""):
    """The folder holding header `name` (its text `header`) for `#include "name"` with -I: once its precompiled
    form (name.gch) exists, g++ reads that instead, much faster. A missing one is built in the background,
    for the next builds: this one reads the header as it is (the same result, slower)."""
    key = digest(compiler_version(command[0]), *command, header, depends)
    folder = Path(root) / f"pch-{key[:16]}"
    shared = kept(root, Path(folder.name) / (name + ".gch"))
    if shared.exists():
        return shared.parent
    folder.mkdir(parents=True, exist_ok=True)
    h = folder / name
    _write(h, header)
    gch = folder / (name + ".gch")
    if gch.exists() or not pch_enabled() or (folder / (name + ".gch.failed")).exists():
        return folder
    lock = folder / (name + ".gch.lock")
    try:
        if lock.exists() and time.time() - lock.stat().st_mtime > _STALE_LOCK:
            lock.unlink()
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
    except FileExistsError:
        return folder  # being built
    except OSError:
        return folder
    _waiting.append({"cmd": [*command, "-x", "c++-header", str(h)], "gch": str(gch), "lock": str(lock),
                     "dir": str(folder)})
    return folder


_waiting = []  # precompiled headers to build once the build that asked for them is done


def start_pch():
    """Starts building, detached, the precompiled headers the last builds asked for (after them: not competing)."""
    while _waiting:
        job = _waiting.pop()
        try:
            subprocess.Popen([sys.executable, "-c", _PCH_SCRIPT, json.dumps(job)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                             close_fds=True)
        except OSError:
            try:
                os.unlink(job["lock"])
            except OSError:
                pass


def pch_ready(folder, name):
    """True when the precompiled form of header name in folder exists."""
    return (Path(folder) / (name + ".gch")).exists()


def pending_pch(root):
    """The precompiled headers being built in the background under root."""
    return sorted(Path(root).glob("pch-*/*.gch.lock"))


def wait_for_pch(root, timeout=600):
    """Waits until no precompiled header is being built under root; returns the seconds each one took."""
    end = time.time() + timeout
    while pending_pch(root) and time.time() < end:
        time.sleep(0.2)
    out = {}
    for f in Path(root).glob("pch-*/*.gch.json"):
        try:
            out[f.name[:-len(".gch.json")]] = json.loads(f.read_text())["seconds"]
        except (OSError, ValueError, KeyError):
            pass
    return out

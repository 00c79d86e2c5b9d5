"""The sandbox every process that runs student code enters (course/sandbox.py): each layer refuses what it should, in
a sandboxed child, and what a sandbox started is gone once it has ended."""
import errno
import json
import os
import signal
import tempfile
import socket
import subprocess
import time
import traceback
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course import sandbox
from tests.support import ROOT

LAYERS = sandbox.layers()
needs = {name: pytest.mark.skipif(not LAYERS[name], reason=f"this host lacks the sandbox's {name} layer")
         for name in sandbox.LAYERS}


def in_sandbox(attempt, readable=(), end=True):
    """Runs attempt() in a forked child entered into a fresh sandbox: (what it returned, as JSON, the sandbox folder)."""
    folder = sandbox.new_folder()
    out = folder / "io" / "out.json"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            sandbox.enter(folder / "home", readable=readable, writable=[folder / "io"])
            out.write_text(json.dumps(attempt()))
            code = 0
        except BaseException:  # noqa: B902 (shown by pytest's captured output)
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    result = json.loads(out.read_text())
    if end:
        sandbox.end(folder)
    return result, folder


def refused(action):
    """'refused' when action() raises PermissionError (or EXDEV, Landlock's answer to a link from elsewhere), else
    what it returned."""
    try:
        return action()
    except PermissionError:
        return "refused"
    except OSError as e:
        if e.errno == errno.EXDEV:
            return "refused"
        raise


@needs["files"]
def test_a_sandboxed_process_reads_the_course_package_but_no_file_outside(tmp_path):
    secret = tmp_path / ".grading_secret"
    secret.write_text("the secret")
    seeds = tmp_path / "source" / "grayscale"
    seeds.mkdir(parents=True)
    (seeds / "01_L0_loop.ipynb").write_text("seed=1234")
    package = Path(sandbox.__file__).with_name("__init__.py")
    got, _ = in_sandbox(lambda: [refused(lambda: secret.read_text()), refused(lambda: os.listdir(tmp_path / "source")),
                                 refused(lambda: package.read_text()[:3])])
    assert got == ["refused", "refused", '"""']


@needs["files"]
def test_a_sandboxed_process_cannot_write_the_build_folder_or_the_gradebook(tmp_path, monkeypatch):
    build = tmp_path / "build"
    (build / "course_module").mkdir(parents=True)
    module = build / "course_module" / "course_module.so"
    module.write_bytes(b"the course's module")
    gradebook = tmp_path / "gradebook.db"
    gradebook.write_bytes(b"grades")
    monkeypatch.setenv("COURSE_BUILD_DIR", str(build))

    def attempt():
        return [refused(lambda: module.read_bytes().decode()), refused(lambda: module.write_bytes(b"mine")),
                refused(lambda: (build / "course_module" / "other.so").write_bytes(b"mine")),
                refused(lambda: os.rename(module, build / "moved.so")),
                refused(lambda: gradebook.write_bytes(b"all full marks"))]
    got, _ = in_sandbox(attempt)
    assert got == ["the course's module", "refused", "refused", "refused", "refused"]
    assert module.read_bytes() == b"the course's module" and gradebook.read_bytes() == b"grades"


@needs["files"]
def test_nothing_a_sandbox_leaves_points_the_grader_elsewhere(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("the secret")

    def attempt():
        io = Path(os.environ["HOME"]).parent / "io"
        return [refused(lambda: os.symlink(secret, io / "result.pt") or "linked"),
                refused(lambda: os.link(secret, io / "result.pt") or "linked")]
    got, folder = in_sandbox(attempt, end=False)
    try:
        assert got == ["refused", "refused"]
        os.symlink(secret, folder / "io" / "made-outside")  # as if it had: the grader copies no link out
        assert not sandbox.copy_out(folder / "io" / "made-outside", tmp_path / "copied")
        os.mkfifo(folder / "io" / "pipe")
        assert not sandbox.copy_out(folder / "io" / "pipe", tmp_path / "copied")
        assert not (tmp_path / "copied").exists()
    finally:
        sandbox.end(folder)


@needs["sockets"]
def test_a_sandboxed_process_opens_no_network_socket_but_a_unix_one():
    def attempt():
        opened = []
        for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM),
                             (socket.AF_INET6, socket.SOCK_STREAM), (socket.AF_UNIX, socket.SOCK_STREAM)):
            opened.append(refused(lambda: socket.socket(family, kind).close() or "opened"))
        return opened
    got, _ = in_sandbox(attempt)
    assert got == ["refused", "refused", "refused", "opened"]


@needs["network"]
def test_landlock_alone_refuses_a_tcp_connection(monkeypatch):
    monkeypatch.setattr(sandbox, "_seccomp", lambda: None)  # the socket opens: Landlock must refuse the connection
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def attempt():
        s = socket.socket()
        return refused(lambda: s.connect(("127.0.0.1", port)) or "connected")
    try:
        got, _ = in_sandbox(attempt)
    finally:
        server.close()
    assert got == "refused"


@needs["signals"]
def test_a_sandboxed_process_cannot_signal_the_grader():
    grader = os.getpid()
    got, _ = in_sandbox(lambda: [refused(lambda: os.kill(grader, signal.SIGTERM) or "sent"),
                                 refused(lambda: os.kill(os.getppid(), 0) or "sent")])
    assert got == ["refused", "refused"]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@needs["user"]
def test_a_block_of_the_largest_size_runs_in_a_sandbox():
    # blk_kernel2d_shar runs a Python thread per CUDA thread: 16x16 tiles (256 threads, the kernel's own threads
    # besides) met RLIMIT_NPROC when it was 256, and every tiled test of a right answer raised "can't start new thread"
    def attempt():
        import torch
        from course.ladder import blk_kernel2d_shar, dim3

        def kernel(blockidx, threadidx, blockdim, shared, syncthreads, out):
            out[threadidx.y * blockdim.x + threadidx.x] = 1
        out = torch.zeros(1024)
        blk_kernel2d_shar(kernel, dim3(1, 1), dim3(32, 32), 1, out)
        return int(out.sum())
    assert in_sandbox(attempt)[0] == 1024


BOMB = """
import os, sys, time
children = 0
try:
    for _ in range(5 * int(sys.argv[1])):
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        children += 1
except BlockingIOError:  # EAGAIN: the sandbox's processes are at their bound
    pass
open(sys.argv[2], "w").write(str(children))
"""


@needs["user"]
def test_a_fork_bomb_is_bounded_and_killed_when_its_sandbox_ends():
    # the bomb forks from a small Python (-S): copies of a process that imported torch cost 2.4 MB of page tables each,
    # and 2,000 of them ran the CI machine out of memory (the group's memory bound is tested below)
    def attempt():
        import subprocess
        import sys
        count = os.path.join(os.environ["TMPDIR"], "children")
        subprocess.run([sys.executable, "-S", "-c", BOMB, str(sandbox.NPROC), count], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return [int(Path(count).read_text()), os.getuid()]
    (children, uid), folder = in_sandbox(attempt, end=False)
    assert 0 < children < sandbox.NPROC
    assert sandbox.processes_of(uid)
    sandbox.end(folder)  # returns once they are gone, not only signalled
    assert not folder.exists()
    assert not sandbox.processes_of(uid)
    assert not any(os.path.exists(g) for g in sandbox.group_folders(uid))


@needs["group"]
def test_a_sandboxs_processes_together_are_bounded_by_its_group():
    def attempt():  # the bounds as the sandboxed process's own groups hold them
        bounds = {}
        for name, folder in sandbox._own_groups().items():
            for f in ("pids.max", "memory.limit_in_bytes", "memory.max"):
                if os.path.exists(os.path.join(folder, f)):
                    bounds[name] = [os.path.basename(folder), int(Path(folder, f).read_text())]
        return [bounds, os.getuid()]
    (bounds, uid), _ = in_sandbox(attempt)
    assert bounds == {"pids": [f"course-sandbox-{uid}", sandbox.TASKS],
                      "memory": [f"course-sandbox-{uid}", sandbox.memory_bound()]}
    assert not any(os.path.exists(g) for g in sandbox.group_folders(uid))  # removed with its sandbox


@needs["user"]
def test_a_process_that_detached_itself_is_killed_when_its_sandbox_ends():
    def attempt():
        r, w = os.pipe()
        if os.fork() == 0:  # a daemon: a session of its own, its parent gone
            os.setsid()
            if os.fork() == 0:
                os.write(w, str(os.getpid()).encode())
                time.sleep(600)
            os._exit(0)
        os.close(w)
        return int(os.read(r, 100))
    daemon, folder = in_sandbox(attempt, end=False)
    assert _alive(daemon)
    sandbox.end(folder)
    deadline = time.monotonic() + 10
    while _alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(daemon)


@pytest.mark.skipif(not (LAYERS["user"] or LAYERS["signals"]), reason="this host gives a sandbox no signal bound")
def test_a_sandboxed_process_kills_what_it_started_and_nothing_outside_before_it_ends():
    # compute-sanitizer waits for every process its child started: the child must end its daemons itself
    outside = subprocess.Popen(["sleep", "600"])

    def attempt():
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.write(w, str(os.getpid()).encode())
                time.sleep(600)
            os._exit(0)
        os.close(w)
        daemon = int(os.read(r, 100))
        sandbox.end_started()
        return daemon
    daemon, folder = in_sandbox(attempt, end=False)  # no sweep from outside before the daemon is looked for
    try:
        deadline = time.monotonic() + 10
        while _alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(daemon)
        assert outside.poll() is None  # the grader's own process, of the same user where no user is the sandbox's
    finally:
        outside.kill()
        sandbox.end(folder)


def test_a_sandboxed_process_gets_a_scratch_folder_of_its_own():
    got, _ = in_sandbox(lambda: [os.environ[v] for v in ("HOME", "TMPDIR", "TRITON_CACHE_DIR")] + [
        open(os.path.join(os.environ["TMPDIR"], "x"), "w").write("1")])
    home = got[0]
    assert all(p.startswith(home) for p in got[:3]) and got[3] == 1


@needs["files"]
def test_a_sandboxed_process_names_its_own_threads_and_no_other_processs():
    # CUDA's driver names its threads (fopen "wb" of /proc/self/task/TID/comm); refused, CUDA failed to start in every
    # sandboxed check on the H100 host (error 304). Another process's files there stay refused, a child's included.
    def attempt():
        import threading

        def name(path):
            return refused(lambda: open(path, "wb").write(b"probe\n"))
        tid, parent = threading.get_native_id(), os.getppid()
        got = [name(f"/proc/self/task/{tid}/comm"), name(f"/proc/{parent}/task/{parent}/comm"),
               name(f"/proc/{parent}/oom_score_adj")]
        child = os.fork()
        if child == 0:
            os._exit(0 if name(f"/proc/self/task/{os.getpid()}/comm") == "refused" else 1)
        got.append(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
        return got
    assert in_sandbox(attempt)[0] == [6, "refused", "refused", 0]


def test_a_sandboxed_process_makes_sandbox_folders_in_its_own_scratch():
    # a check inside a sandboxed kernel starts spares (on a GPU): their folders go where it may write
    got, folder = in_sandbox(lambda: str(sandbox.new_folder("course-spare-")))
    assert got.startswith(str((folder / "home").resolve()))


def test_doctor_names_each_layer_and_what_grading_does_without_it(monkeypatch, capsys):
    from course.grading.commands.doctor import Report, check_sandbox
    assert set(sandbox.MISSING) <= set(sandbox.LAYERS)
    monkeypatch.setattr(sandbox, "layers", lambda: dict.fromkeys(sandbox.LAYERS, False))
    check_sandbox(Report())
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(sandbox.LAYERS)
    assert all("missing here" in line and "grading goes on" in line for line in lines), lines
    monkeypatch.setenv("COURSE_SANDBOX", "0")
    assert sandbox.record() == {}


@needs["files"]
def test_a_source_that_includes_the_grading_secret_shows_no_byte_of_it(tmp_path, monkeypatch):
    from course import check_rgb2grey_cuda, cuda_begin
    monkeypatch.setenv("COURSE_CPU_MODE", "1")
    secret = tmp_path / ".grading_secret"
    secret.write_text("TOPSECRET-4242")
    src = cuda_begin + f'#include "{secret}"\n' + r"""
__global__ void rgb_to_grayscale_kernel(unsigned char* x, unsigned char* out, int n) {}
torch::Tensor rgb_to_grayscale(torch::Tensor input) { return input; }
"""
    with pytest.raises(AssertionError) as failed:
        check_rgb2grey_cuda(src, "tiny")
    assert "does not compile" in str(failed.value) and "TOPSECRET" not in str(failed.value)


# ---- the notebook's kernel during grading ---------------------------------------------------------------------------

def _graded_notebook(*cells):
    def test(source, gid):
        return new_code_cell(source, metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": gid,
                                                            "points": 1, "locked": True}})
    return new_notebook(cells=[new_code_cell(c) if isinstance(c, str) else test(*c) for c in cells],
                        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


GREY = ("import torch\n"
        "def rgb2grey_py(x):\n"
        "    return (0.2989*x[0] + 0.5870*x[1] + 0.1140*x[2]).to(torch.uint8)\n")


TRITON = ("import triton\nimport triton.language as tl\nfrom course.topics.grayscale import check_rgb2grey_triton\n" +
          (ROOT / "examples" / "grayscale" / "alice" / "rgb2grey_triton.py").read_text())


@needs["files"]
def test_the_kernel_is_judged_from_its_sandbox_and_reads_nothing_of_the_graders(tmp_path):
    from course.grading.nbgrader.autograde import SandboxedKernelManager
    from course.grading.nbgrader.trusted import TrustedExecute
    secret = tmp_path / ".grading_secret"
    secret.write_text("the secret")
    notebook = tmp_path / "autograded" / "s" / "a"
    notebook.mkdir(parents=True)
    (notebook / "data.txt").write_text("the notebook's data")
    attack = (f"import os, socket\n"
              f"tried = []\n"
              f"for act in (lambda: open({str(secret)!r}).read(), lambda: open('data.txt').read(),\n"
              f"            lambda: socket.socket(socket.AF_INET), lambda: open({str(tmp_path / 'mine')!r}, 'w')):\n"
              f"    try:\n"
              f"        tried.append(str(act())[:19])\n"
              f"    except PermissionError:\n"
              f"        tried.append('refused')\n"
              f"print(tried)\n")
    # the student's own check, in the kernel: its children stay in the kernel's sandbox (none can be made inside)
    nb = _graded_notebook(GREY + attack, TRITON + 'check_rgb2grey_triton(rgb2grey_triton, "ragged")',
                          ('check_rgb2grey(rgb2grey_py, "tiny")', "right"))
    nb = TrustedExecute(kernel_manager_class=SandboxedKernelManager).preprocess(
        nb, {"metadata": {"path": str(notebook)}})[0]
    assert nb.cells[0].outputs[-1]["text"] == "['refused', \"the notebook's data\", 'refused', 'refused']\n"
    # on a GPU host a check's children cannot start CUDA inside the kernel's sandbox: it says so (sandbox.py)
    said = "ragged passed" if sandbox.memory_limit() is not None else \
        "not run in the graded notebook's kernel (its sandbox gives the GPU to no process it starts); the grader " \
        "judges this answer itself"
    assert nb.cells[1].outputs == [{"output_type": "stream", "name": "stdout", "text": f"rgb2grey_triton: {said}\n"}]
    assert nb.cells[2].outputs == [{"output_type": "stream", "name": "stdout", "text": "rgb2grey_py: tiny passed\n"}]
    assert not (tmp_path / "mine").exists()


@needs["user"]
def test_a_grading_run_ends_every_sandbox_it_made_however_it_was_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_SANDBOX_DIR", str(tmp_path))

    def attempt():
        if os.fork() == 0:
            os.setsid()
            time.sleep(600)
            os._exit(0)
        return os.getuid()
    uid, folder = in_sandbox(attempt, end=False)
    assert folder.parent == sandbox.base() and sandbox.processes_of(uid)
    sandbox.end_all(tmp_path / "course-sandboxes")
    assert not sandbox.processes_of(uid) and not list(sandbox.base().iterdir())


def test_a_fresh_build_folder_is_made_before_the_sandbox_is_entered(tmp_path, monkeypatch):
    # on a new grading host the build folder does not exist yet: a sandboxed build could not make it (seen on the
    # H200: every CUDA check's build failed with "Permission denied" on COURSE_BUILD_DIR)
    import os
    from course import sandbox
    fresh = tmp_path / "builds"
    monkeypatch.setenv("COURSE_BUILD_DIR", str(fresh))
    pid = os.fork()
    if pid == 0:
        try:
            sandbox.enter(tmp_path / "home")
            os._exit(0)
        except BaseException:  # noqa: B902
            os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert fresh.is_dir()


def test_finding_the_layers_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert sandbox.layers() == LAYERS
    assert list(tmp_path.iterdir()) == []  # a class graded often must not fill /tmp with probes

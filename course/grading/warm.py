"""Processes forked from a warm process: torch, nbgrader, the course and ipykernel imported once per grading run, not per process.

A notebook kernel, a student's grading worker and the judge's check server each spend seconds importing torch and
the course before doing anything. During `course grade` a warm process (this module's server) holds them imported,
never touching the GPU, and forks each of those processes from itself: the command that would run
`python -m MODULE ARGS` runs warmstub.py instead, which hands the warm process the module, its arguments, its folder,
environment (CUDA_VISIBLE_DEVICES included) and standard streams; the forked child becomes that process with exactly
those. Where no warm process runs, command() is the usual `python -m` and kernels start as Jupyter always does.
"""
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from jupyter_client.manager import AsyncKernelManager

from ..assignments import topic_modules
from .warmstub import SOCKET_ENV, command

PRELOAD = ("torch", "numpy", "course", "course.device", "course.ladder", "course.cuda", "course.harness.cuda",
           "course.harness.python", "course.harness.forkserver", "ipykernel.kernelapp", "ipykernel.ipkernel", "IPython",
           "nbgrader.apps.autogradeapp", "course.grading.run.worker", "course.grading.nbgrader.trusted", *topic_modules())
KERNEL = "ipykernel_launcher"


class WarmKernelManager(AsyncKernelManager):
    """Starts an ipykernel on Unix sockets of its own, forked from the warm process when $COURSE_WARM_KERNELS names one.

    Over TCP, Jupyter picks free ports, frees them and hands them to the kernel: a kernel that another grading
    worker starts in between can take one, and the later kernel dies before its notebook's first cell (a student
    failed for the machine's sake). A socket file next to the kernel's own connection file cannot be taken."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.transport, self.cache_ports = "ipc", False

    def write_connection_file(self, **kwargs):
        """Names the kernel's sockets after a connection file this process created (no other kernel has its name)."""
        if self.transport == "ipc" and not self.connection_file:
            fd, self.connection_file = tempfile.mkstemp(prefix="kernel-", suffix=".json")
            os.close(fd)
            self.ip = self.connection_file[:-len(".json")] + "-ipc"
        super().write_connection_file(**kwargs)

    def format_kernel_cmd(self, extra_arguments=None):
        """The kernel's command: warmstub.py in place of `python -m ipykernel_launcher` when a warm process runs."""
        cmd = super().format_kernel_cmd(extra_arguments)
        if len(cmd) > 2 and cmd[1:3] == ["-m", KERNEL]:
            return command(KERNEL, cmd[3:])
        return cmd


def nbgrader_args():
    """nbgrader's option that starts the grading's kernels with WarmKernelManager, in a sandbox (nbgrader/autograde.py)."""
    return ["--Execute.kernel_manager_class=course.grading.nbgrader.autograde.SandboxedKernelManager"]


def _become(request, fds, closing):
    """In the forked child: becomes the process the stub asked for, `python -m <module> <argv>` (never returns)."""
    code = 1
    try:
        for fd in closing:
            os.close(fd)
        os.setpgid(0, 0)  # a group of its own: when the stub goes, the lifeline ends this process and its children
        signal.set_wakeup_fd(-1)
        for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in zip((0, 1, 2), fds[:3]):
            os.dup2(fd, target)
        for fd in fds[:3]:
            os.close(fd)
        lifeline = fds[3]
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])

        def watch():
            try:
                os.read(lifeline, 1)
            finally:
                os.killpg(0, signal.SIGKILL)
        threading.Thread(target=watch, daemon=True).start()
        if request["module"] == KERNEL:
            # ipykernel read JPY_PARENT_PID when it was imported (here, before the fork): give it this kernel's own
            parent = [f"--IPKernelApp.parent_handle={os.environ['JPY_PARENT_PID']}"] if os.environ.get("JPY_PARENT_PID") else []
            sys.argv = [KERNEL, *request["argv"], *parent]
            from ipykernel import kernelapp
            kernelapp.launch_new_instance()
        else:
            import runpy
            sys.argv = [request["module"], *request["argv"]]
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if not isinstance(e.code, (int, type(None))):  # sys.exit("why"): Python prints the why
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: B902 (whatever failed, say so where the stub's stderr goes)
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(path, profiler=False):
    """The warm process: imports what the processes it forks need, then forks one per stub that connects to path."""
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")  # as ipykernel would set it
    import importlib
    from course.harness.children import PROFILER_IMPORTS  # in PRELOAD too; on a GPU, once here, not per check server
    for name in PRELOAD + (PROFILER_IMPORTS if profiler else ()):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: B902 (a module missing here is imported by the forked process as usual)
            pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "reap")
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
    print("ready", flush=True)
    forked = {}  # pid -> the stub's connection
    while True:
        for key, _ in sel.select():
            if key.data == "parent":
                if not os.read(sys.stdin.fileno(), 4096):  # the grading run has ended: so do we (kernels stay)
                    return
            elif key.data == "reap":
                os.read(wake_r, 4096)
                while forked:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    conn = forked.pop(pid, None)
                    if conn is not None:
                        try:
                            conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
                        except OSError:
                            pass
                        conn.close()
            else:
                conn, _ = listener.accept()
                try:
                    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 4)
                    while not msg.endswith(b"\n"):
                        more = conn.recv(1 << 20)
                        if not more:
                            break
                        msg += more
                    request = json.loads(msg)
                except (OSError, ValueError):
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    others = [listener.fileno(), wake_r, wake_w, conn.fileno(), sel.fileno()] + \
                        [c.fileno() for c in forked.values()]
                    _become(request, fds, others)
                for fd in fds:
                    os.close(fd)
                forked[pid] = conn
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


class WarmKernels:
    """The grading run's handle on its warm process: start() it, give env() to the workers, close() at the end."""

    def __init__(self, env=None, profiler=False):
        self.dir = tempfile.mkdtemp(prefix="course-warm-")
        self.path = os.path.join(self.dir, "kernels.sock")
        cmd = [sys.executable, "-m", "course.grading.warm", self.path] + (["--profiler"] if profiler else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def wait_ready(self, timeout=300):
        """True once the warm process has imported everything and listens."""
        deadline = time.monotonic() + timeout
        line = self.proc.stdout.readline()  # blocks until "ready" or the process ends
        return line.strip() == b"ready" and time.monotonic() < deadline and os.path.exists(self.path)

    def env(self):
        """What an environment needs for command() and the kernels to fork from the warm process."""
        return {SOCKET_ENV: self.path}

    def close(self):
        """Ends the warm process (kernels it started run on to their end)."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        for p in (self.path, self.dir):
            try:
                os.unlink(p) if p == self.path else os.rmdir(p)
            except OSError:
                pass


if __name__ == "__main__":  # python -m course.grading.warm SOCKET [--profiler]
    serve(sys.argv[1], profiler="--profiler" in sys.argv[2:])

"""Code run in a fresh Python process, so a crash, a poisoned CUDA context or an environment variable stays there (taught in drills/03 and 06).

CUDA reads variables like CUDA_LAUNCH_BLOCKING once, when a process first touches the GPU, and an illegal
memory access leaves that process's CUDA context unusable: an experiment with either needs a process of
its own. run_in_child runs a piece of Python in one and reports what happened, with the line of your code
that raised.
"""
import io
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

CHILD = "<child>"  # the file name a child's tracebacks give its code
TIMEOUT = 300  # seconds: importing torch, loading a built module and a launch take seconds; a hang is stopped


@dataclass
class ChildRun:
    """What a child process did: exit code, output, the error it raised and the line of its code that raised it."""
    code: str
    returncode: int  # None: stopped at the time limit; negative: killed by that signal
    stdout: str
    stderr: str
    seconds: float
    env: dict = field(default_factory=dict)  # the variables set for it

    @property
    def ok(self):
        """True when the child ran to the end without an error."""
        return self.returncode == 0

    @property
    def error(self):
        """The error in one line ("RuntimeError: CUDA error: ...", "killed by SIGSEGV"), or None."""
        if self.returncode is None:
            return "stopped: it ran past the time limit"
        if self.returncode < 0:
            return f"killed by {signal.Signals(-self.returncode).name}"
        if self.returncode == 0:
            return None
        last = _last_traceback(self.stderr)
        if last:
            lines = [ln for ln in last.splitlines() if ln.strip()]
            tail = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", ln)]
            if tail:
                return tail[-1].strip()
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        return lines[-1].strip() if lines else f"exit code {self.returncode}"

    @property
    def line(self):
        """The line number (from 1) of the child's code that raised, the innermost one in its traceback; None without one."""
        last = _last_traceback(self.stderr)
        found = re.findall(rf'File "{re.escape(CHILD)}", line (\d+)', last or "")
        return int(found[-1]) if found else None

    def source_line(self, number=None):
        """The text of a line of the child's code (default: the line that raised)."""
        number = self.line if number is None else number
        lines = self.code.splitlines()
        return lines[number - 1].strip() if number and 0 < number <= len(lines) else None

    def lines(self, pattern=""):
        """The lines of the child's output (stdout, then stderr) that match a regular expression."""
        return [ln for ln in (self.stdout + self.stderr).splitlines() if re.search(pattern, ln)]

    def __str__(self):
        setting = " ".join(f"{k}={v}" for k, v in self.env.items())
        head = f"{'ran to the end' if self.ok else 'failed'} in {self.seconds:.1f} s"
        head += f" ({setting})" if setting else ""
        if self.ok:
            return head
        where = f"\n  raised at line {self.line}: {self.source_line()}" if self.line else ""
        return f"{head}{where}\n  {self.error}"


def _last_traceback(text):
    start = text.rfind("Traceback (most recent call last):")
    return text[start:] if start >= 0 else None


def run_in_child(code, env=None, timeout=TIMEOUT, under=None, **variables):
    """Runs Python code in a fresh process (env: variables set there; under: a command to run it under) and returns a ChildRun (taught in drills/03)."""
    if not isinstance(code, str):
        raise TypeError(f"code must be a string of Python, not {type(code).__name__}")
    try:
        json.dumps(variables)
    except TypeError as e:
        raise TypeError(f"the variables passed to the child must be strings, numbers, lists or dicts: {e}") from None
    env = {k: str(v) for k, v in (env or {}).items()}
    # The child's output is the caller's to read: library warnings stay out of it.
    full_env = dict(os.environ, PYTHONWARNINGS="ignore", MPLBACKEND="Agg", **env)
    with tempfile.TemporaryDirectory(prefix="course-child-") as tmp:
        job = os.path.join(tmp, "job.json")
        with open(job, "w") as f:
            json.dump({"code": code, "variables": variables}, f)
        out_path, err_path = os.path.join(tmp, "out.txt"), os.path.join(tmp, "err.txt")
        start = time.perf_counter()
        status = None
        if not under:
            try:
                status = _zygote().run(job, out_path, err_path, full_env, timeout)
            except OSError:
                status = None  # no warm process to fork from: start a fresh interpreter instead
        if status is None:
            for path in (out_path, err_path):  # what a warm child that failed to start left
                open(path, "wb").close()
            status = run_in_session([*(under or []), sys.executable, "-m", "course.processes", job], full_env,
                                    out_path, timeout, errors=err_path)
            status = "timeout" if status is None else status
        seconds = time.perf_counter() - start
        with open(out_path, errors="replace") as f:
            stdout = f.read()
        with open(err_path, errors="replace") as f:
            stderr = f.read()
    return ChildRun(code, None if status == "timeout" else status, stdout, stderr, seconds, env)


def run_in_session(cmd, env, log, timeout, running=None, errors=None):
    """Runs cmd in a session of its own, its output appended to log (its stderr to errors, when given): its exit code,
    or None after timeout (then killed, all of it)."""
    with open(log, "ab") as out, open(errors or os.devnull, "ab") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err if errors else subprocess.STDOUT, env=env,
                                start_new_session=True)
        if running is not None:  # a set of the processes running now, for a caller that may have to stop them all
            running.add(proc)
        try:
            return proc.wait(timeout=timeout)
        except BaseException as e:  # noqa: B902 (the timeout, or an interrupt: nothing it started keeps running)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if isinstance(e, subprocess.TimeoutExpired):
                return None
            raise
        finally:
            if running is not None:
                running.discard(proc)


# ---- a warm process to fork children from: Python and torch start once, not once per run ----------------------
#
# It imports torch and the course's build code and never touches a GPU, so a child forked from it starts CUDA
# afresh, reading CUDA_LAUNCH_BLOCKING and PYTORCH_NO_CUDA_MEMORY_CACHING from the environment it is given.

_warm, _warm_lock = None, threading.Lock()


class _Zygote:
    """The client side of the warm process: one child at a time."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "course.processes", "--zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=dict(os.environ, PYTHONWARNINGS="ignore"))
        self.replies, self.lock = queue.Queue(), threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))
        self.replies.put(None)

    def alive(self):
        return self.proc.poll() is None

    def run(self, job, out_path, err_path, env, timeout):
        """Forks a child that runs job; its exit status, or "timeout" (then it is killed)."""
        with self.lock:
            return self._run(job, out_path, err_path, env, timeout)

    def _run(self, job, out_path, err_path, env, timeout):
        request = {"job": job, "out": out_path, "err": err_path, "env": env, "cwd": os.getcwd()}
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise OSError(f"the warm process is gone: {e}") from None
        started = self.replies.get(timeout=120)
        if not started or "pid" not in started:
            raise OSError("the warm process did not start a child")
        try:
            done = self.replies.get(timeout=timeout)
        except queue.Empty:
            try:
                os.killpg(started["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.replies.get(timeout=30)
            return "timeout"
        if done is None:
            raise OSError("the warm process stopped")
        return done["status"]


def _zygote():
    global _warm
    with _warm_lock:
        if _warm is None or not _warm.alive():
            _warm = _Zygote()
        return _warm


def _serve():
    """The warm process: reads one request a line, forks a child for it, reports its pid and then its exit status."""
    import torch  # noqa: F401 (the point: imported once)

    import course.toolchain.load  # noqa: F401 (what a child's load_cuda needs)
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.environ.clear()
            os.environ.update(req["env"])
            os.chdir(req["cwd"])
            for fd, path in ((1, req["out"]), (2, req["err"])):
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(target, fd)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)
            code = 0
            try:
                _main(req["job"])
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    import ctypes
                    ctypes.CDLL(None).fflush(None)  # what C code (a kernel's printf) left in its buffers
                finally:
                    os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)


def _main(job_path):
    import linecache
    with open(job_path) as f:
        job = json.load(f)
    code = job["code"]
    linecache.cache[CHILD] = (len(code), None, code.splitlines(True), CHILD)  # tracebacks show the child's lines
    namespace = {"__name__": "__main__", **job["variables"]}
    exec(compile(code, CHILD, "exec"), namespace)


if __name__ == "__main__":  # `python -m course.processes JOB.json` (a fresh child), or --zygote (the warm process)
    _serve() if sys.argv[1] == "--zygote" else _main(sys.argv[1])

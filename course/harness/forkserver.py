"""Check children forked from a warm process: torch is imported once, not once per check.

The server (`python -m course.harness.forkserver`) imports torch, the child's code and what judging needs,
never touches the GPU, and forks one child per request; each child starts a session of its own, sends its
output to its log file and runs a task (tasks.py): child.run (the student's module), judge.judge (the verdict, in
a process that never loaded the student's module) or child.build (load_cuda on a check's source). The server reports
each child's pid when it starts and its exit status when it ends (signals as negative numbers), one JSON
line each, on stdout.

A child that loads student code (SANDBOXED) runs in a sandbox (course/sandbox.py): the server copies the files
its job names into the sandbox's folder, and once the child has ended copies its output back to where the check
asked, kills whatever the child left running and removes the folder.
"""
import json
import os
import selectors
import signal
import subprocess
import sys
import threading

from course.harness.tasks import STUDENT as SANDBOXED  # the tasks that load a student's module, launch function or source


def _enter(task, folder, args):
    """In the forked child: enters the sandbox a task's child runs in. A build compiles with the build folder
    writable (no student code runs in the compiler) and narrows to its own folder before it imports the module."""
    from course import sandbox
    memory = sandbox.memory_limit()
    home, io = folder / "home", folder / "io"
    if task == "speed":  # the lock that times one student at a time on a GPU (speed.gpu_lock): the grader's, shared
        from course.toolchain import build_root
        locks = build_root() / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        sandbox.enter(home, writable=[io, (locks, sandbox.READ | sandbox.WRITE_FILE | sandbox.MAKE_REG)], memory=memory)
        return
    if task != "build":
        sandbox.enter(home, writable=[io], memory=memory)
        return
    from course.toolchain.toolkit import SHARED
    sandbox.enter_build(folder, memory=memory)
    job = json.loads(open(args[0]).read())
    job["env"].update({k: os.environ[k] for k in (*sandbox.CACHES, "COURSE_BUILD_DIR")})  # its own temporary files
    job["env"].pop(SHARED, None)
    with open(args[0], "w") as f:
        json.dump(job, f)


def _ended(folder, outputs):
    """After a sandboxed child: its outputs copied back, what it left running killed, its folder removed."""
    from course import sandbox
    for inside, outside in outputs:
        sandbox.copy_out(inside, outside)
    sandbox.end(folder)


def _serve():
    import importlib

    import torch  # noqa: F401 (the point of the server: imported once)

    from course.harness.tasks import named, task
    named("course.harness.judge:preload")()  # what judging imports, once: each judge forked later starts with it
    sel = selectors.DefaultSelector()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "job")
    sel.register(wake_r, selectors.EVENT_READ, "reap")
    running, buffer = {}, b""

    def say(msg):
        os.write(1, (json.dumps(msg) + "\n").encode())

    while True:
        for key, _ in sel.select():
            if key.data == "reap":
                os.read(wake_r, 4096)
                while running:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                    if pid == 0:
                        break
                    job_id, folder, outputs = running.pop(pid)
                    if folder is not None:
                        _ended(folder, outputs)
                    say({"id": job_id, "status": os.waitstatus_to_exitcode(status)})
                continue
            data = os.read(sys.stdin.fileno(), 65536)
            if not data:  # the checks' process has gone: so do we, and the sandboxed children nobody waits for
                for folder in [folder for _, folder, _ in running.values() if folder is not None]:
                    _ended(folder, [])
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                req = json.loads(line)
                for module in req.get("imports", []):  # what the child would import: here, once for every later child
                    importlib.import_module(module)
                folder, args, outputs = None, req["args"], []
                from course import sandbox
                if req["task"] in SANDBOXED and sandbox.wanted():
                    folder = sandbox.new_folder()
                    args, outputs = sandbox.stage(args, folder / "io")
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        os.setsid()
                        signal.set_wakeup_fd(-1)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                        os.dup2(fd, 1)
                        os.dup2(fd, 2)
                        if folder is not None:
                            _enter(req["task"], folder, args)
                        task(req["task"])(*args)
                        code = 0
                    except BaseException:
                        import traceback
                        traceback.print_exc()
                    finally:
                        sys.stdout.flush()
                        sys.stderr.flush()
                        os._exit(code)
                running[pid] = (req["id"], folder, outputs)
                say({"id": req["id"], "pid": pid})


class Server:
    """The client side: starts the server, sends jobs, waits for their children."""

    def __init__(self, env=None):
        from course.grading.warmstub import command  # during `course grade`, forked from its warm process too
        self.env = env
        self.proc = subprocess.Popen(command("course.harness.forkserver", [], env), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.lock, self.done = threading.Lock(), threading.Condition()
        self.replies, self.next_id = {}, 0
        self.busy, self.retiring = 0, False  # calls holding the server; whether it closes once none does
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.done:
                self.replies.setdefault(msg["id"], {}).update(msg)
                self.done.notify_all()
        with self.done:
            self.replies[None] = "gone"
            self.done.notify_all()

    def alive(self):
        """True while the server runs."""
        return self.proc.poll() is None

    def _wait(self, job_id, key, timeout):
        with self.done:
            self.done.wait_for(lambda: key in self.replies.get(job_id, {}) or None in self.replies, timeout)
            return self.replies.get(job_id, {}).get(key)

    def run(self, task, args, log, timeout, imports=()):
        """Runs child.<task>(*args) in a forked child with output to log, the server having imported imports first:
        its exit code, or None after timeout (then killed)."""
        with self.lock:
            self.next_id += 1
            job_id = self.next_id
            self.proc.stdin.write((json.dumps({"id": job_id, "task": task, "args": [str(a) for a in args],
                                               "log": str(log), "imports": list(imports)}) + "\n").encode())
            self.proc.stdin.flush()
        pid = self._wait(job_id, "pid", 120)
        if pid is None:
            raise OSError("the check server did not start a child")
        status = self._wait(job_id, "status", timeout)
        if status is None and not self.alive():
            raise OSError("the check server stopped")
        if status is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._wait(job_id, "status", 30)
        with self.done:
            self.replies.pop(job_id, None)
        return status

    def hold(self):
        """Keeps the server open for a call about to run (release() when it has)."""
        with self.lock:
            self.busy += 1

    def release(self):
        """Ends a hold: a retired server closes with its last call."""
        with self.lock:
            self.busy -= 1
            last = self.retiring and not self.busy
        if last:
            self.close()

    def retire(self):
        """Closes the server once the calls it holds have their children's statuses (at once when it holds none): the
        environment changed under it (a compile set TORCH_CUDA_ARCH_LIST), and closing it then lost a running child's
        status, a GraderFault for a right answer's check."""
        with self.lock:
            self.retiring = True
            idle = not self.busy
        if idle:
            self.close()

    def close(self):
        """Stops the server (its running children are left to finish); one still ending its sandboxes after 30 s is
        killed (a check that needs a new server must not fail on the old one: in CI, one did not end in 30 s while the
        machine was out of memory)."""
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


if __name__ == "__main__":  # `python -m course.harness.forkserver`
    _serve()

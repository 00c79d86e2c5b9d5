"""Check children started before they are needed: a child that must be a fresh process warms up ahead of its job.

compute-sanitizer has to start the process it watches, so a memory or race check cannot fork from the warm
server: its child imports torch and creates a CUDA context before it runs anything. A spare does that while
the notebook runs its other checks: it starts when a notebook first checks a compiled exercise that has a
sanitized check, warms up, then waits for its job (job.json in its own folder). The check hands it the job
and waits for it to end, as it would for a child it started itself. A spare nobody asks for ends itself when
the process that started it has gone, or after IDLE seconds (the check then starts its child on the spot).
"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

IDLE = 300  # seconds a spare waits for its job: an idle one holds a CUDA context of its own
POLL = 0.01  # seconds between a spare's looks for its job


class Spare:
    """One child process started ahead: `prefix python -m course.harness.child wait FOLDER OWNER`."""

    def __init__(self, prefix, env):
        self.owner, self.folder = os.getpid(), tempfile.mkdtemp(prefix="course-spare-")
        self.log = os.path.join(self.folder, "output.txt")
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "course.harness.child", "wait", self.folder, str(self.owner)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def alive(self):
        """True while the spare waits (or works)."""
        return self.proc.poll() is None

    def run(self, task, args, log, timeout):
        """Has the spare run child.<task>(*args), its output appended to log: its exit code, None after timeout (then killed)."""
        job = os.path.join(self.folder, "job.json")
        with open(job + ".tmp", "w") as f:
            json.dump({"task": task, "args": [str(a) for a in args]}, f)
        os.replace(job + ".tmp", job)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            self.close()
            with open(self.log, "rb") as src, open(log, "ab") as dst:
                shutil.copyfileobj(src, dst)
            shutil.rmtree(self.folder, ignore_errors=True)
        return code

    def close(self):
        """Ends the spare and whatever it started."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()


_spares, _lock = {}, threading.Lock()


def _key(prefix, env):
    return tuple(prefix), tuple(sorted((env or {}).items()))


def prepare(prefix, env):
    """Starts a spare for children run as `prefix python ...` in env, unless one already waits."""
    key = _key(prefix, env)
    with _lock:
        spare = _spares.get(key)
        if spare is None or not spare.alive():
            _spares[key] = Spare(prefix, env)


def take(prefix, env):
    """The waiting spare for prefix and env, or a new one when none waits."""
    with _lock:
        spare = _spares.pop(_key(prefix, env), None)
    if spare is not None and spare.alive():
        return spare
    return Spare(prefix, env)


@atexit.register
def _close_all():
    with _lock:
        spares = [s for s in _spares.values() if s.owner == os.getpid()]  # not a forked copy's parent's
        _spares.clear()
    for spare in spares:
        spare.close()
        shutil.rmtree(spare.folder, ignore_errors=True)


def wait_for_job(folder, owner):
    """The spare's side: the job in folder once it is there, or None when the owner process has gone or IDLE ran out."""
    job, deadline, checked = os.path.join(folder, "job.json"), time.monotonic() + IDLE, 0.0
    while not os.path.exists(job):
        now = time.monotonic()
        if now > deadline:
            return None
        if now - checked > 0.5:
            checked = now
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                return None
        time.sleep(POLL)
    with open(job) as f:
        return json.load(f)

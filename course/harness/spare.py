"""Check children started before they are needed: a child that must be a fresh process warms up ahead of its job.

compute-sanitizer has to start the process it watches, so a memory or race check cannot fork from the warm
server: its child imports torch and creates a CUDA context before it runs anything. A spare does that while
the notebook runs its other checks: it starts when a notebook first checks a compiled exercise that has a
sanitized check, warms up, then waits for its job (job.json in its own folder). The check hands it the job
and waits for it to end, as it would for a child it started itself. A spare nobody asks for ends itself when
the process that started it has gone, or after IDLE seconds (the check then starts its child on the spot).

On a GPU every check's child would create a CUDA context of its own, and with many students graded at once that is
most of a check's time (2-4 s of a 3-8 s check on the H200 host, 16 students at once, where a check alone takes
0.3-0.4 s). So the calls of an answer's checks (the "run" task) go to a kept spare: forked from the warm process
where there is one, its context outlives its job, and it serves one answer (one module's file), never two: another
answer's checks get a new one. After a job that left the process sound (an error the student's function raised is
part of its result; a sticky CUDA error, such as a bad access, or a launch error left pending, is not) it says so
(done.json) and waits for the next; otherwise it exits, as a child would, and a new one starts at once for the next
check. Between jobs it empties PyTorch's cache of freed blocks, so that a check's prefilled block is the one its
kernel's output takes, as in a fresh process. State the answer's own code keeps (a counter of calls) lives on from
one check to the next, as it would in the student's notebook. A speed test times in a fresh child (code an earlier
job loaded could have replaced its clocks), and the judge never runs where student code has. `course grade` starts
a kept spare, and the spares of the notebook's sanitized checks, as each notebook with such checks starts.

A spare runs student code, so it enters a sandbox (course/sandbox.py) before it imports anything: its folder holds
its scratch (home/) and io/, where it finds its job and where the check's files are copied in and its outputs copied
back out (never a path of the grader's). When it ends, whatever it started is killed with it.
"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from course import sandbox

IDLE = 300  # seconds a spare waits for its job: an idle one holds a CUDA context of its own
POLL = 0.01  # seconds between a spare's looks for its job
UNUSED = 75  # a spare's exit status when it ended without a job (its owner gone, or IDLE): the job goes to a new one


class Spare:
    """One child process started ahead: `prefix python -m course.harness.tasks wait FOLDER OWNER [kept]`."""

    def __init__(self, prefix, env, kept=False):
        from course.grading.warmstub import command
        self.owner, self.folder, self.kept = os.getpid(), str(sandbox.new_folder("course-spare-")), kept
        self.io = os.path.join(self.folder, "io")  # where its jobs and their files go
        self.answer = None  # a kept spare's: the answer whose checks it runs
        self.log = os.path.join(self.folder, "output.txt")
        args = ["wait", self.io, str(self.owner)] + (["kept"] if kept else [])
        cmd = command("course.harness.tasks", args, env) if kept else [*prefix, sys.executable, "-m",
                                                                          "course.harness.tasks", *args]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)

    def alive(self):
        """True while the spare waits (or works)."""
        return self.proc.poll() is None

    def run(self, task, args, log, timeout):
        """Has the spare run child.<task>(*args), its output appended to log: its exit code, None after timeout (then
        killed); 0 from a kept spare that did the job cleanly and waits for the next."""
        job, done = os.path.join(self.io, "job.json"), os.path.join(self.io, "done.json")
        staged, outputs = sandbox.stage(args, self.io)
        staged_log = os.path.join(self.io, "log.txt")
        sandbox.write_in(staged_log, b"")
        sandbox.write_in(job + ".tmp", json.dumps({"task": task, "args": staged, "log": staged_log}).encode())
        os.replace(job + ".tmp", job)
        deadline = time.monotonic() + timeout
        while self.kept:
            if os.path.exists(done):
                os.remove(done)
                self._back(outputs, staged_log, log)
                return 0
            if not self.alive() or time.monotonic() > deadline:
                break
            time.sleep(POLL)
        try:
            code = self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        self._back(outputs, staged_log, log)
        with open(self.log, "rb") as src, open(log, "ab") as dst:
            shutil.copyfileobj(src, dst)
        sandbox.end(self.folder)
        return code

    def _back(self, outputs, staged_log, log):
        """A job's outputs copied back from the spare's io/, and what it printed appended to the job's log."""
        for inside, outside in outputs:
            sandbox.copy_out(inside, outside)
        printed = staged_log + ".out"
        if sandbox.copy_out(staged_log, printed):
            with open(printed, "rb") as src, open(log, "ab") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(printed)

    def close(self):
        """Ends the spare and whatever it started."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        sandbox.sweep(sandbox.user_of(self.folder))  # what it started and left running, however it detached


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


def _run(spare, new, task, args, log, timeout):
    """spare.run, or new().run when the spare ended idle just as the job came: (the spare that ran it, its code)."""
    code = spare.run(task, args, log, timeout)
    if code == UNUSED:
        spare = new()
        code = spare.run(task, args, log, timeout)
    return spare, code


def run_taken(prefix, env, task, args, log, timeout):
    """Runs child.<task>(*args) in the waiting spare for prefix and env (or a new one): its exit code, None after
    timeout."""
    return _run(take(prefix, env), lambda: Spare(prefix, env), task, args, log, timeout)[1]


_kept = {}  # environment -> {"fresh": a kept spare warming up, "used": the one an answer's checks use}


def _alive(spare):
    return spare if spare is not None and spare.alive() else None


def _discard(spare):
    if spare is not None:
        spare.close()
        sandbox.end(spare.folder)


def prepare_kept(env):
    """Starts a kept spare for env ahead of the next answer's first check, unless one already waits."""
    with _lock:
        slots = _kept.setdefault(_key([], env), {})
        if _alive(slots.get("fresh")) is None:
            slots["fresh"] = Spare([], env, kept=True)


def run_kept(task, args, log, timeout, env, answer):
    """Runs child.<task>(*args) for an answer (its module's file) in this process's kept spare for that answer, or a
    new one (the one warming up, if any): one answer's checks share a process, never two answers'. The spare stays
    while its process is sound, else another starts at once. The exit code (0 when it stays), None after timeout."""
    with _lock:
        slots = _kept.setdefault(_key([], env), {})
        used, stale = _alive(slots.pop("used", None)), None
        if used is not None and used.answer != answer:
            used, stale = None, used
        spare = used or _alive(slots.pop("fresh", None))
    _discard(stale)
    spare, code = _run(spare or Spare([], env, kept=True), lambda: Spare([], env, kept=True), task, args, log, timeout)
    spare.answer = answer
    if not spare.alive():
        prepare_kept(env)  # the next check's, warming up while this one is judged
        return code
    with _lock:
        if _alive(slots.get("used")) is None:
            slots["used"], spare = spare, None
    _discard(spare)  # another thread's spare for an answer is there already: one is enough
    return code


@atexit.register
def _close_all():
    with _lock:
        spares = [s for s in [*_spares.values(), *(s for slots in _kept.values() for s in slots.values())]
                  if s.owner == os.getpid()]  # not a forked copy's parent's
        _spares.clear()
        _kept.clear()
    for spare in spares:
        _discard(spare)


def wait_for_job(folder, owner):
    """The spare's side: the job in folder once it is there, or None when the owner process has gone or IDLE ran out."""
    job, deadline, checked = os.path.join(folder, "job.json"), time.monotonic() + IDLE, 0.0
    while not os.path.exists(job):
        now = time.monotonic()
        if now > deadline:
            return None
        if now - checked > 0.5:
            checked = now
            if not os.path.exists(f"/proc/{owner}"):  # not kill(owner, 0): the sandbox signals nothing outside it
                return None
        time.sleep(POLL)
    with open(job) as f:
        return json.load(f)


def in_sandbox(folder, life):
    """The spare's side: runs life() in the sandbox of the spare whose io/ folder is folder (a folder of no spare: as
    it is). A process with threads (forked warm, course/grading/warm.py) runs it in a child of its own, which has
    one: a sandbox confines the thread that enters it and what that thread starts."""
    home = os.path.join(os.path.dirname(os.path.abspath(folder)), "home")
    if os.path.basename(os.path.abspath(folder)) != "io" or not os.path.isdir(home) or not sandbox.wanted():
        return life()
    memory = sandbox.memory_limit()  # never torch's word here: it would poison the fork below for CUDA
    if len(os.listdir("/proc/self/task")) > 1:
        sandbox.supervise(os.path.dirname(home), [], [folder], life, memory=memory)
    sandbox.enter(home, writable=[folder], memory=memory)
    return life()


def job_done(folder):
    """A kept spare's side: says its job ended cleanly, and that it waits for the next."""
    os.remove(os.path.join(folder, "job.json"))
    done = os.path.join(folder, "done.json")
    with open(done + ".tmp", "w") as f:
        f.write("{}")
    os.replace(done + ".tmp", done)

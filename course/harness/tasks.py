"""What a check's child process can be asked to do, by name: the plumbing (forkserver.py, spare.py, children.py)
starts a task without importing either side of the boundary.

Two sides: a process with student code (child.py's run and build, and a spare's wait: load the student's module,
place the inputs, call, copy the outputs out as plain data, wire.py) and the judge (judge.py: reads that plain data
and decides, in a process no student code entered). child.py imports nothing that judges (an import contract in
pyproject.toml holds it). Two tasks run rung code beside student code, named here and imported only in that
process: origin's probe of a wrong element (its facts only word a failure) and a rung's loader (a Triton launch
function's, harness/triton.py). A speed test records the student's launches in one (record.py, plain data out) and
times them where no student host code runs (speed.py's measure replays them: harness/replay.py); in CPU mode the
timing imports the student's module to reach its kernels, so it too runs sandboxed.
"""
import importlib
import sys

TASKS = {"run": "course.harness.child:run", "build": "course.harness.child:build", "wait": "course.harness.child:wait",
         "speed": "course.harness.speed:measure", "record": "course.harness.record:record",
         "origin": "course.harness.origin:probe",
         "judge": "course.harness.judge:judge", "warm": "course.harness.child:warm"}
STUDENT = ("run", "record", "speed", "origin", "build", "wait")  # the tasks that load a student's module, launch function or source


def named(path):
    """The function a "module:function" path names, imported now."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def task(name):
    """The function of a task name (TASKS)."""
    return named(TASKS[name])


if __name__ == "__main__":  # `python -m course.harness.tasks TASK ARGS...`: a task in a fresh interpreter
    task(sys.argv[1])(*sys.argv[2:])

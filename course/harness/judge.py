"""The judge: a process no student code entered decides a check from the plain data a child reported (wire.py).

It is forked from the warm check server (forkserver.py) after preload(), reads the check's own copy of the job and
the result copied out of the child's folder, and runs the job's verdict (cuda.py's, triton.py's, speed.py's); what
it cannot read as plain data fails the check.
"""
import json

from course.harness import trace, wire
from course.harness.wire import RESULTS, VERDICTS, Job, Result, unreadable


def preload():
    """Imports what judging needs (the checks' machinery, every topic): each judge forked afterwards starts with it."""
    import importlib
    import pkgutil

    import course.topics  # the topics import every rung's runner
    for module in pkgutil.iter_modules(course.topics.__path__):
        importlib.import_module(f"course.topics.{module.name}")


def judge(job_path, result_path, verdict_path, sha256=None):
    """The judge's work, in a process that never loaded the student's module: the verdict on a run, as JSON. The job is
    the check's own copy (sha256: of its bytes, as the check wrote them); the result is plain data (wire.py) that the
    child reported, and what cannot be read fails the check."""
    from course.harness.tasks import named
    trace.mark("judge started", trace.key_of(job_path))
    job = wire.read(job_path, Job, sha256)  # the check's own: what cannot be read is the grader's fault
    if not VERDICTS.fullmatch(job.verdict):
        raise wire.Unreadable(f"the job names {job.verdict!r}, which is not one of the course's verdicts")
    try:
        result = wire.read(result_path, RESULTS.get(job.task, Result))
    except wire.Unreadable as e:
        outcome = {"passed": False, "message": unreadable(job.func, e)}
    else:
        try:
            record = named(job.verdict)(job, result)
            outcome = {"passed": True, "record": record}  # what a verdict returns besides passing: a speed test's figures
        except AssertionError as e:
            outcome = {"passed": False, "message": str(e), "element": getattr(e, "element", None),
                       "case": getattr(e, "case", 0)}
    with open(verdict_path, "w") as f:
        json.dump(outcome, f)
    trace.mark("judge done", trace.key_of(job_path))

"""`course grade`: every collected submission autograded by nbgrader, several students at once, resumable.

The plan (run/plan.py): the students whose inputs changed since they were last graded (run/ledger.py); their CUDA
sources compiled on all cores first (run/compile.py); then a pool of worker processes (run/pool.py, run/worker.py,
forked from the run's warm process, warm.py), each grading one student at a time into its own copy of the gradebook,
with the GPU it may use in CUDA_VISIBLE_DEVICES (as many workers per GPU as --workers allows). This process alone
writes the course's gradebook: each finished student's rows are merged into it (run/merge.py), one at a time. A
student whose grading breaks is recorded with the reason, any older grade of theirs removed, and grading goes on.
"""
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ... import sandbox
from ..run.layout import CourseError, state_dir
from ..run.plan import make_plan, unreadable
from ..run.pool import STUDENT_TIMEOUT, default_workers, finish, grade_students, prebuild, visible_gpus, worker_env
from ..run.verify import disagreement_line


def parse_shard(text):
    """'2/4' -> (2, 4); CourseError for anything else."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except (ValueError, AttributeError):
        raise CourseError(f"--shard takes i/N, e.g. 1/2 (the first of two shards), not {text!r}") from None
    if not 1 <= i <= n:
        raise CourseError(f"--shard {text}: i must be between 1 and N")
    return i, n


def grade(root, assignment, students=None, workers=None, gpus=None, shard=None, force=False, verify=False,
          db=None, compile_first=True, timeout=STUDENT_TIMEOUT, quiet=False, warm=True):
    """Grades the changed submissions of an assignment; returns a summary (also written to the state folder as JSON)."""
    plan = make_plan(root, assignment, students, shard, force, db)
    gpus = visible_gpus() if gpus is None else gpus
    workers = workers or default_workers()
    threads = max(1, (os.cpu_count() or 1) // workers)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    summary = {"assignment": assignment, "students": len(plan.todo), "unchanged": len(plan.unchanged),
               "unchanged_students": list(plan.unchanged),
               "workers": workers, "gpus": gpus, "shard": list(shard) if shard else None, "graded": [],
               "failed": {}, "disagreements": [], "kernel_stopped": {}, "timing": {}, "verify": verify}
    say(f"{assignment}: {len(plan.todo)} to grade, {len(plan.unchanged)} unchanged since last graded; "
        f"{workers} at once" + (f" over GPUs {','.join(gpus)}" if gpus else " (CPU mode: no GPU)"))
    t0 = time.perf_counter()
    for student, why in unreadable(plan.root, assignment, plan.todo).items():  # recorded now; the rest go on
        plan.todo.remove(student)
        finish(plan, student, None, {"ok": False, "reason": why, "seconds": 0.0}, summary)
    kernels, warm_env, per_student = None, {}, {}
    # The run's scratch, the workers' and kernels' temporary folders included: removed at the end however the run
    # ends, also when an interrupt kills workers before their own clean-up runs
    scratch = Path(tempfile.mkdtemp(prefix="course-grade-"))
    temp = {"TMPDIR": str(scratch / "tmp")}
    os.mkdir(temp["TMPDIR"])
    # The sandboxes of this run's student code (course/sandbox.py): a folder their users can pass through, whose
    # sandboxes, and whatever they left running, end with the run however it ends
    # in /tmp itself, whatever TMPDIR says: a kernel's Unix sockets live there, and a socket's path has at most 107
    # bytes (under a long TMPDIR every kernel failed: "ZMQError: File name too long")
    short = "/tmp" if os.access("/tmp", os.W_OK) else None
    sandboxes = Path(tempfile.mkdtemp(prefix="course-grade-sandboxes-", dir=short))
    sandboxes.chmod(0o711)
    temp["COURSE_SANDBOX_DIR"] = str(sandboxes)
    summary["sandbox"] = sandbox.record()
    missing = [layer for layer, present in summary["sandbox"].items() if not present]
    if not summary["sandbox"]:
        say("sandbox off (COURSE_SANDBOX=0): student code runs with the "
            "grader's rights")
    elif missing:
        say(f"sandbox without {', '.join(missing)} on this host (python -m course doctor says what that leaves open)")
    try:
        if plan.todo and warm:  # its imports take seconds: they overlap the compiling
            from ..warm import WarmKernels
            kernels = WarmKernels(env=worker_env(None, threads, temp), profiler=bool(gpus))
        if plan.todo and compile_first:
            seconds, built, failed = prebuild(plan, gpu=bool(gpus))
            summary["timing"]["compile"] = seconds
            say(f"compiled {built} CUDA sources ahead in {seconds:.0f} s ({failed} do not compile; their "
                "notebooks say why)")
        if kernels is not None:
            if kernels.wait_ready():
                warm_env = kernels.env()
            else:
                say("the warm kernel process did not start: kernels start cold (slower, the same grades)")
        summary["warm_kernels"] = bool(warm_env)
        if plan.todo:
            grade_students(plan, scratch, workers, gpus, worker_env, threads, {**temp, **warm_env}, verify, timeout,
                           quiet, per_student, summary)
    finally:
        if kernels is not None:
            kernels.close()
        sandbox.end_all(sandboxes / "course-sandboxes")
        shutil.rmtree(sandboxes, ignore_errors=True)
        for _ in range(5):  # a killed kernel may still be writing its last files there for a moment
            shutil.rmtree(scratch, ignore_errors=True)
            if not scratch.exists():
                break
            time.sleep(1)
    wall = time.perf_counter() - t0
    summary["timing"].update(wall=wall, per_student=wall / len(plan.todo) if plan.todo else 0.0)
    for key in ("autograde", "verify"):
        values = [r["timing"][key] for r in per_student.values() if key in r.get("timing", {})]
        if values:
            summary["timing"][f"{key}_mean"] = sum(values) / len(values)
    summary["timing"]["student_mean"] = (sum(r["seconds"] for r in per_student.values()) / len(per_student)
                                         if per_student else 0.0)
    (state_dir(plan.root, plan.assignment) / "last-grade.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def report(summary):
    """The summary of a grading run as lines for the instructor."""
    t = summary["timing"]
    lines = [f"graded {len(summary['graded'])} of {summary['students']} students of {summary['assignment']} "
             f"({summary['unchanged']} unchanged, not graded again) in {t.get('wall', 0):.0f} s: "
             f"{t.get('per_student', 0):.1f} s a student with {summary['workers']} at once"]
    if "autograde_mean" in t:
        lines.append(f"  one student takes {t['student_mean']:.0f} s: autograde {t['autograde_mean']:.0f} s"
                     + (f", clean re-run {t['verify_mean']:.0f} s" if "verify_mean" in t else "")
                     + (f"; compiling ahead took {t['compile']:.0f} s" if "compile" in t else ""))
    if summary.get("sandbox") is not None:
        box = summary["sandbox"]
        lines.append("  student code sandboxed: " + (", ".join(k for k, v in box.items() if v) or "no layer")
                     + (f"; missing on this host: {', '.join(k for k, v in box.items() if not v)}"
                        if not all(box.values()) else "") if box else "  student code NOT sandboxed (COURSE_SANDBOX=0)")
    judged = summary.get("judged", {})
    if judged:
        lines.append("  notebooks judged: " + ", ".join(f"{n} {kind}" + (" (every test cell by nbgrader's own process)"
                                                                         if kind == "trusted" else "")
                                                        for kind, n in sorted(judged.items())))
    for student, reason in sorted(summary["failed"].items()):
        lines.append(f"  FAILED {student}: {reason}")
    for student, notebooks in sorted(summary["kernel_stopped"].items()):
        for nb, why in notebooks.items():
            lines.append(f"  {student}/{nb}: {why} (the cells before kept their points)")
    if summary["disagreements"]:
        lines.append(f"  {len(summary['disagreements'])} tests disagree with the clean re-run (python -m course "
                     "verify lists them; a student may have tampered with a check):")
        lines += [f"    {disagreement_line(row)}" for row in summary["disagreements"]]
    return "\n".join(lines)

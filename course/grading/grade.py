"""`course grade`: every collected submission autograded by nbgrader, several students at once, resumable.

The plan: the students whose inputs changed since they were last graded (ledger.py); their CUDA sources
compiled on all cores first (compile.py); then a pool of worker processes (worker.py, forked from the run's warm
process, warm.py), each grading one student at a time into its own copy of the gradebook, with the GPU it may use
in CUDA_VISIBLE_DEVICES (as many workers per GPU as --workers allows). This process alone writes the course's
gradebook: each finished student's rows are merged into it (merge.py), one at a time. A student whose grading breaks is recorded
with the reason, any older grade of theirs removed, and grading goes on.
"""
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import sandbox
from ..device import nvidia_smi
from ..processes import run_in_session
from .run import merge
from .run.layout import (CourseError, course_root, db_path, db_url, notebook_names, read_notebook, require_assignment,
                     shard_dir, state_dir, submitted_students)
from .run.ledger import Ledger, fingerprint, grading_code_digest, grading_mode
from .nbgrader.seeds import ensure_secret
from .run.verify import disagreement_line
from .warmstub import command

STOP_GRACE = 3  # seconds a worker that ended without a grade waits to learn whether grading was interrupted
STUDENT_TIMEOUT = 3 * 3600  # seconds for one student's grading, all notebooks and the re-run together


def visible_gpus():
    """The GPU indices this host offers (CUDA_VISIBLE_DEVICES respected), [] in CPU mode or without nvidia-smi."""
    if os.environ.get("COURSE_CPU_MODE") == "1":
        return []
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return [g for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip() and g.strip() != "-1"]
    return [row[0] for row in nvidia_smi("index") or [] if row[0].isdigit()]


def parse_shard(text):
    """'2/4' -> (2, 4); CourseError for anything else."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except (ValueError, AttributeError):
        raise CourseError(f"--shard takes i/N, e.g. 1/2 (the first of two shards), not {text!r}") from None
    if not 1 <= i <= n:
        raise CourseError(f"--shard {text}: i must be between 1 and N")
    return i, n


def in_shard(student, shard):
    """True when the student belongs to shard (i, N): a stable hash of the id, the same on every host."""
    return shard is None or zlib.crc32(student.encode()) % shard[1] == shard[0] - 1


@dataclass
class Plan:
    """What one `course grade` run will do."""
    root: Path
    assignment: str
    target: str                                   # the gradebook this run writes (the course's, or a shard's)
    ledger: Ledger
    todo: list = field(default_factory=list)      # students to grade
    unchanged: list = field(default_factory=list)  # graded before, inputs unchanged
    fingerprints: dict = field(default_factory=dict)
    mode: str = "gpu"                             # where the checks run kernels: "gpu" or "cpu" (ledger.grading_mode)


def unreadable(root, assignment, students):
    """{student: why} for each student with a submitted file that is not a notebook (nbgrader would fail on it)."""
    bad = {}
    for s in students:
        for p in sorted((Path(root) / "submitted" / s / assignment).glob("*.ipynb")):
            try:
                read_notebook(p)
            except CourseError as e:
                bad.setdefault(s, str(e).replace(str(Path(root)) + "/", ""))
    return bad


def make_plan(root, assignment, students=None, shard=None, force=False, db=None):
    """Which students to grade (changed since last time, or all with force) and where the grades go."""
    root = course_root(root)
    require_assignment(root, assignment)
    notebook_names(root, assignment)  # released
    found = submitted_students(root, assignment)
    if not found:
        raise CourseError(f"no submissions of {assignment} in {root / 'submitted'}: run `python -m course collect "
                          f"{assignment} ...` first")
    if students:
        unknown = sorted(set(students) - set(found))
        if unknown:
            raise CourseError(f"no submission of {assignment} from {', '.join(unknown)} in submitted/")
        found = [s for s in found if s in students]
    found = [s for s in found if in_shard(s, shard)]
    main = db_url(root, db)
    if not db_path(main).exists():
        raise CourseError(f"no gradebook at {db_path(main)}: run `python -m course release {assignment}` first")
    if shard:
        folder = shard_dir(root, assignment, shard)
        target = f"sqlite:///{folder / 'gradebook.db'}"
        if not (folder / "gradebook.db").exists():
            merge.copy_gradebook(main, target)
        ledger = Ledger(root, assignment, f"{folder.name}/ledger.jsonl")
    else:
        target, ledger = main, Ledger(root, assignment)
    secret, _ = ensure_secret(root)
    code, mode = grading_code_digest(), grading_mode()
    plan = Plan(root, assignment, target, ledger, mode=mode)
    done = ledger.entries()
    graded = set(merge.students_in(target, assignment))
    for s in found:
        fp = fingerprint(root, assignment, s, secret, code, mode)
        plan.fingerprints[s] = fp
        before = done.get(s)
        # a student whose grading failed is tried again: the cause may have been the machine, not the submission
        fresh = (before and before["fingerprint"] == fp and before["status"] == "graded" and s in graded
                 and (root / "autograded" / s / assignment).is_dir())
        (plan.unchanged if fresh and not force else plan.todo).append(s)
    return plan


def default_workers():
    """Students graded at once: one per core (a student's notebooks run one after another, mostly on one core)."""
    return max(1, os.cpu_count() or 1)


class Progress:
    """A one-line progress bar with an ETA on stderr."""

    def __init__(self, total, out=sys.stderr):
        self.total, self.done, self.start, self.out = total, 0, time.monotonic(), out
        self.tty = hasattr(out, "isatty") and out.isatty()

    def step(self, text):
        """One more student finished: text says who and how it went."""
        self.done += 1
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        bar = "#" * int(20 * self.done / max(1, self.total))
        line = (f"[{bar:<20}] {self.done}/{self.total}  {text}  elapsed {_clock(elapsed)}, "
                f"ETA {_clock(eta) if self.done < self.total else 'done'}")
        self.out.write(("\r\x1b[K" if self.tty else "") + line + ("" if self.tty else "\n"))
        self.out.flush()

    def close(self):
        """Ends the bar's line."""
        if self.tty:
            self.out.write("\n")
            self.out.flush()


def _clock(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60}:{seconds % 60:02d}"


def _worker_env(gpu, threads, extra=None):
    env = dict(os.environ, PYTHONWARNINGS="ignore", **(extra or {}))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    env.setdefault("OMP_NUM_THREADS", str(threads))
    env.setdefault("MKL_NUM_THREADS", str(threads))
    return env


_running = set()  # the worker processes running now: stopped with their sessions when grading is interrupted
_stopping = threading.Event()  # set when grading is interrupted: the students stopped then are not recorded


def _stop_all():
    _stopping.set()
    for proc in list(_running):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def prebuild(plan, processes=None, gpu=True):
    """Compiles the CUDA sources of the students to grade on all cores: (seconds, sources built, sources that failed)."""
    from .run.compile import build_all, compile_jobs
    t = time.perf_counter()
    jobs = []
    for s in plan.todo:
        for p in sorted((plan.root / "submitted" / s / plan.assignment).glob("*.ipynb")):
            try:
                jobs += compile_jobs(read_notebook(p), gpu=gpu)
            except CourseError:
                continue
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    results = build_all(jobs, processes or os.cpu_count(), env=env)
    return time.perf_counter() - t, len(results), sum(1 for _, e in results if e)


def grade(root, assignment, students=None, workers=None, gpus=None, shard=None, force=False, verify=False,
          db=None, compile_first=True, timeout=STUDENT_TIMEOUT, quiet=False, warm=True):
    """Grades the changed submissions of an assignment; returns a summary (also written to the state folder as JSON)."""
    plan = make_plan(root, assignment, students, shard, force, db)
    _stopping.clear()
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
        _finish(plan, student, None, {"ok": False, "reason": why, "seconds": 0.0}, summary)
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
            from .warm import WarmKernels
            kernels = WarmKernels(env=_worker_env(None, threads, temp), profiler=bool(gpus))
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
            _pool(plan, scratch, workers, gpus, _worker_env, threads, {**temp, **warm_env}, verify, timeout, quiet,
                  per_student, summary)
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


def _pool(plan, tmp, workers, gpus, make_env, threads, extra_env, verify, timeout, quiet, per_student, summary):
    """Grades plan.todo in `workers` worker processes at once (scratch in tmp); each finished student is merged in turn."""
    logs = state_dir(plan.root, plan.assignment) / "logs"
    logs.mkdir(exist_ok=True)
    lock = threading.Lock()
    slots = list(range(workers))
    progress = Progress(len(plan.todo), out=open(os.devnull, "w") if quiet else sys.stderr)
    template = f"sqlite:///{Path(tmp) / 'template.db'}"
    merge.copy_gradebook(plan.target, template)

    def one(student):
        with lock:
            slot = slots.pop()
        gpu = gpus[slot % len(gpus)] if gpus else None
        mine = f"sqlite:///{Path(tmp) / (student + '.db')}"
        result_path = Path(tmp) / f"{student}.json"
        try:
            shutil.copy(db_path(template), db_path(mine))
            args = ["--root", str(plan.root), "--assignment", plan.assignment, "--student", student, "--db", mine,
                    "--result", str(result_path)] + (["--verify"] if verify else [])
            env = make_env(gpu, threads, extra_env)
            log = logs / f"{student}.log"
            log.write_text("")
            t = time.perf_counter()
            code = run_in_session(command("course.grading.run.worker", args, env), env, log, timeout, _running)
            seconds = time.perf_counter() - t
            if code is None:
                result = {"ok": False, "reason": f"grading took longer than {timeout} s and was stopped"}
            elif result_path.exists():
                result = json.loads(result_path.read_text())
            else:  # a cancelled job or Ctrl-C stops the worker too: the main thread hears of it a moment later
                _stopping.wait(STOP_GRACE)  # (its signal handler), and then this is no failure
                result = {"ok": False, "reason": f"the grading process stopped (exit code {code}); see {log}"}
            result["seconds"] = seconds
            if _stopping.is_set():  # interrupted: not graded, not failed; the next run grades this student
                return
            with lock:  # the course's gradebook: one writer, one student at a time
                _finish(plan, student, mine, result, summary)
                per_student[student] = result
                total = result.get("scores")
                progress.step(f"{student}: " + (f"{total[0]:g}/{total[1]:g}" if result.get("ok") and total
                                                else "FAILED") + f" ({seconds:.0f} s)")
        finally:
            with lock:
                slots.append(slot)
            for p in (db_path(mine), result_path):
                p.unlink(missing_ok=True)

    try:
        with ThreadPoolExecutor(workers) as pool:
            try:
                list(pool.map(one, plan.todo))
            except BaseException:  # an interrupt: the students being graded stop now, the finished are kept
                pool.shutdown(wait=False, cancel_futures=True)
                _stop_all()
                raise
    finally:
        progress.close()


def _finish(plan, student, worker_db, result, summary):
    """Merges a finished student into the gradebook and the ledger (a failed one: old grade removed, reason kept)."""
    entry = {"student": student, "fingerprint": plan.fingerprints[student], "mode": plan.mode,
             "seconds": round(result["seconds"], 1)}
    if result.get("ok"):
        merge.merge_student(worker_db, plan.target, plan.assignment, student)
        score, top = result.get("scores") or (None, None)
        entry.update(status="graded", score=score, max_score=top, kernel_stopped=result.get("kernel_stopped", {}),
                     judged=result.get("judged", {}),
                     disagreements=result.get("disagreements", []), verified=result.get("verified"),
                     timing=result.get("timing", {}), warnings=result.get("warnings", [])[:20])
        summary["graded"].append(student)
        judged = summary.setdefault("judged", {})
        for how in result.get("judged", {}).values():
            kind = how.split(":")[0]
            judged[kind] = judged.get(kind, 0) + 1
        summary["disagreements"] += result.get("disagreements", [])
        if result.get("kernel_stopped"):
            summary["kernel_stopped"][student] = result["kernel_stopped"]
    else:
        merge.remove_student(plan.target, plan.assignment, student)
        folder = plan.root / "autograded" / student / plan.assignment
        if folder.is_dir():
            shutil.rmtree(folder)
        entry.update(status="failed", reason=result.get("reason", "unknown"))
        summary["failed"][student] = entry["reason"]
    plan.ledger.record(entry)


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

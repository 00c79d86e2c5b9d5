"""A plan graded by a pool of worker processes (worker.py, forked from the run's warm process, warm.py), each grading
one student at a time into its own copy of the gradebook, with the GPU it may use in CUDA_VISIBLE_DEVICES (as many
workers per GPU as --workers allows); their CUDA sources compiled on all cores first (compile.py). This process alone
writes the course's gradebook: each finished student's rows are merged into it (merge.py), one at a time."""
import json
import os
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ...device import nvidia_smi
from ...processes import run_in_session
from ..warmstub import command
from . import merge
from .layout import CourseError, db_path, read_notebook, state_dir


STOP_GRACE = 3  # seconds a worker that ended without a grade waits to learn whether grading was interrupted
STUDENT_TIMEOUT = 3 * 3600  # seconds for one student's grading, all notebooks and the re-run together


def visible_gpus():
    """The GPU indices this host offers (CUDA_VISIBLE_DEVICES respected), [] in CPU mode or without nvidia-smi."""
    if os.environ.get("COURSE_CPU_MODE") == "1":
        return []
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return [g for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip() and g.strip() != "-1"]
    return [row[0] for row in nvidia_smi("index") or [] if row[0].isdigit()]


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


def worker_env(gpu, threads, extra=None):
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
    from ..run.compile import build_all, compile_jobs
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


def grade_students(plan, tmp, workers, gpus, make_env, threads, extra_env, verify, timeout, quiet, per_student,
                   summary):
    """Grades plan.todo in `workers` worker processes at once (scratch in tmp); each finished student is merged in turn."""
    _stopping.clear()  # an interrupted run before, in this process, left it set
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
                finish(plan, student, mine, result, summary)
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


def finish(plan, student, worker_db, result, summary):
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

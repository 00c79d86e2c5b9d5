"""One student's grading, in a process of its own: nbgrader's autograde into the worker's gradebook (test cells judged
outside the kernel, course/grading/nbgrader/trusted.py), and with --verify the clean re-run as an audit (`course verify`'s,
course/grading/run/verify.py).

`course grade` starts one per student (several at once) with the GPU it may use in CUDA_VISIBLE_DEVICES,
and merges the gradebook it wrote into the course's. What it found is written as JSON to --result.
"""
import argparse
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        try:
            self.records.append((record.levelname, record.getMessage()))
        except Exception:  # a record that cannot be formatted is no reason to fail the student
            pass


def autograde(root, assignment, student, db_url):
    """Runs nbgrader's Autograde for one student in this process, as `nbgrader autograde` would; returns (ok, warnings and errors)."""
    from nbgrader.apps.autogradeapp import AutogradeApp
    os.chdir(root)
    app = AutogradeApp()
    collect = _Collect()
    ok = True
    app.log.addHandler(collect)
    from ..warm import nbgrader_args  # kernels on sockets of their own, forked warm where a warm process runs
    argv = [assignment, "--student", student, "--create", "--force", f"--db={db_url}", *nbgrader_args()]
    try:
        app.initialize(argv)
        app.start()
    except SystemExit as e:
        ok = e.code in (0, None)
    return ok, collect.records


def failure_reason(records, root, assignment, student):
    """Why a student's autograde failed, in a line or two, from nbgrader's log."""
    errors = [msg for level, msg in records if level in ("ERROR", "CRITICAL")]
    for msg in errors:
        lines = [line for line in msg.strip().splitlines() if line.strip()]
        if lines and lines[0].startswith("Traceback"):
            return lines[-1][:500]
    if errors:
        return errors[0].strip().splitlines()[0][:500]
    return "nbgrader stopped without saying why (see .nbgrader.log)"


def scores(db_url, assignment, student):
    """(score, max score) of a student's submission in a gradebook, or None."""
    from nbgrader.api import Gradebook, MissingEntry
    with Gradebook(db_url) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        return sub.score, sub.max_score


def execute_records(root, assignment, student):
    """({notebook: why its kernel stopped}, {notebook: how its test cells were judged}) from the student's autograded
    notebooks, as the execute step recorded them ("in the kernel" where a step that runs test cells there graded)."""
    import nbformat
    stopped, judged = {}, {}
    for p in sorted((Path(root) / "autograded" / student / assignment).glob("*.ipynb")):
        record = nbformat.read(p, as_version=4).metadata.get("course", {})
        if record.get("kernel_stopped"):
            stopped[p.stem] = record["kernel_stopped"]
        judged[p.stem] = record.get("judged", "in the kernel")
    return stopped, judged


def _end_with_parent():
    """Ends this worker and everything it started (its session) when `course grade` goes away, however it goes."""
    import signal
    import threading
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1)
        if os.getpgid(0) == os.getpid():  # a session of its own, as course grade starts it
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, daemon=True).start()


def main(argv=None):
    """Grades one student."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True)
    p.add_argument("--assignment", required=True)
    p.add_argument("--student", required=True)
    p.add_argument("--db", required=True, help="the worker's own gradebook (a copy of the course's)")
    p.add_argument("--result", required=True)
    p.add_argument("--verify", action="store_true")
    args = p.parse_args(argv)
    _end_with_parent()
    from ..nbgrader.seeds import load_secret
    from .verify import disagreements, verify_student
    result = {"student": args.student, "timing": {}}
    t = time.perf_counter()
    try:
        ok, records = autograde(args.root, args.assignment, args.student, args.db)
        result["timing"]["autograde"] = time.perf_counter() - t
        result["ok"] = ok
        result["warnings"] = [m.splitlines()[0][:300] for lvl, m in records if lvl == "WARNING"]
        if not ok:
            result["reason"] = failure_reason(records, args.root, args.assignment, args.student)
        else:
            result["scores"] = scores(args.db, args.assignment, args.student)
            result["kernel_stopped"], result["judged"] = execute_records(args.root, args.assignment, args.student)
            if args.verify:
                t = time.perf_counter()
                rows = verify_student(args.root, args.assignment, args.student, load_secret(args.root))
                result["timing"]["verify"] = time.perf_counter() - t
                result["verified"] = len(rows)
                result["disagreements"] = disagreements(rows)
    except BaseException as e:  # noqa: B902 (whatever broke, the parent records it and goes on)
        result["ok"] = False
        result["reason"] = f"{type(e).__name__}: {e}".strip()[:500]
        result["traceback"] = traceback.format_exc()[-3000:]
    Path(args.result).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Re-verification outside nbgrader: every submission's answers re-checked where no student code runs, against the notebook's score.

A student's cell runs in the same Python as the test cells after it, so it can redefine a check
(`check_rgb2grey = lambda *a: None`), patch the course package or PyTorch. Here each submitted
notebook runs again, split over two fresh processes built from the instructor's source: a worker
runs the notebook's cells (only the solution cells come from the student) and nothing else; the
judge runs each test cell's check from the installed package, asking the worker only for the
student's answer: a Python function is called in the worker on the judge's inputs and its output
comes back, a CUDA source comes back as text and is compiled and run by the judge's own child
processes. Any test whose verdict differs from the autograded notebook's is reported.
"""
import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbgrader.utils import determine_grade, is_solution

from .seeds import is_test_cell
from .trusted import Answers, answer, decode, encode, judge_cell

NOTEBOOK_TIMEOUT = 1800  # seconds for one notebook's re-run: compiles and checks included


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


def merged(source_nb, submitted_nb):
    """The instructor's notebook with the student's solution cells in place of the solutions."""
    answers = {_meta(c).get("grade_id"): c.source for c in submitted_nb.cells if is_solution(c)}
    nb = nbformat.from_dict(source_nb)
    for cell in nb.cells:
        if is_solution(cell):
            cell.source = answers.get(_meta(cell)["grade_id"], "")
    return nb


def notebook_verdicts(autograded_nb):
    """{grade_id: True if the autograded notebook gave the test cell full marks}."""
    out = {}
    for cell in autograded_nb.cells:
        if is_test_cell(cell):
            score, most = determine_grade(cell)
            out[_meta(cell)["grade_id"]] = score == most
    return out


# ---- the worker: the notebook's cells, and nothing but what the judge asks of them

def _worker(conn, cwd):
    """Runs in a fresh process: executes cells and answers the judge's questions about the student's names."""
    os.chdir(cwd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    while True:
        try:
            what, arg = conn.recv()  # from the judge
        except EOFError:
            return
        if what == "run":
            try:
                result = shell.run_cell(arg, store_history=False)
                error = result.error_in_exec or result.error_before_exec
                reply = ("value", None if error is None else f"{type(error).__name__}: {error}")
            except BaseException as e:  # noqa: B902
                reply = ("raised", type(e).__name__, str(e))
        else:
            reply = answer(shell.user_ns, what, arg)
        try:
            data = encode(reply)
        except Exception as e:  # an answer that cannot be sent back
            data = encode(("raised", "TypeError", f"the result could not be sent back for checking: {e}"))
        conn.send_bytes(data)


class Worker(Answers):
    """The judge's handle on the worker process; after the worker dies or hangs, every request fails saying so."""

    def __init__(self, cwd):
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(theirs, str(cwd)), daemon=True)
        self.proc.start()
        theirs.close()
        self.stopped = None

    def ask(self, what, arg):
        """Sends a request and waits for its answer (read as weights-only data: nothing of the student's runs here)."""
        if self.stopped:
            raise RuntimeError(f"the notebook's process had stopped earlier ({self.stopped}): nothing left to check")
        try:
            self.conn.send((what, arg))
            return decode(self.conn.recv_bytes())
        except EOFError:
            self.stopped = f"it ended during a {what} (exit code {self.proc.exitcode})"
        except BaseException:  # the judge's time limit, or an interrupt: the worker is stuck; stop it
            self.stopped = f"it was stopped after a {what} ran past its time limit"
            self.proc.kill()
            raise
        self.proc.join(5)
        self.stopped = f"it ended during a {what} (exit code {self.proc.exitcode})"
        raise RuntimeError(f"the notebook's process stopped: {self.stopped}")

    def close(self):
        """Ends the worker."""
        self.conn.close()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def _run_child(nb_path, result_path):
    """Re-runs a merged notebook: cells in a worker, checks here; writes each test cell's verdict as JSON."""
    import torch

    import course  # noqa: F401 (imported before any student code runs anywhere)
    nb = nbformat.read(nb_path, as_version=4)
    worker = Worker(os.getcwd())  # the source notebook's folder, as when the notebook runs
    verdicts = {}
    try:
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            if cell.cell_type != "code" or "demo" in tags or ("gpu" in tags and not torch.cuda.is_available()):
                continue  # a demo cell only shows the student's function at work; the tests call it themselves
            if not is_test_cell(cell):
                if not worker.stopped:
                    try:
                        worker.value("run", cell.source)
                    except Exception:  # the worker gone: every later test fails, saying so
                        pass
                continue
            try:
                judge_cell(worker, cell.source)
                verdict = {"passed": True, "message": ""}
            except BaseException as e:  # noqa: B902 (a failed check, or the worker gone)
                verdict = {"passed": False, "message": f"{type(e).__name__}: {e}"[:2000]}
            verdicts[_meta(cell)["grade_id"]] = verdict
            Path(result_path).write_text(json.dumps(verdicts))
    finally:
        worker.close()
    Path(result_path).write_text(json.dumps(verdicts))


def verify_notebook(source_path, submitted_path, timeout=NOTEBOOK_TIMEOUT):
    """Re-runs a submitted notebook's answers against the source's tests in a fresh process: {grade_id: verdict}."""
    source_nb = nbformat.read(source_path, as_version=4)
    submitted_nb = nbformat.read(submitted_path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="course-verify-") as tmp:
        nb_path, result = Path(tmp) / "merged.ipynb", Path(tmp) / "verdicts.json"
        nbformat.write(merged(source_nb, submitted_nb), nb_path)
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="ignore")
        try:
            proc = subprocess.run([sys.executable, "-m", "course.grading.verify", "--child", str(nb_path), str(result)],
                                  cwd=Path(source_path).parent, env=env, capture_output=True, text=True,
                                  errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired:
            proc = None
        tests = [_meta(c)["grade_id"] for c in source_nb.cells if is_test_cell(c)]
        verdicts = json.loads(result.read_text()) if result.exists() else {}
    if proc is None:
        why = f"the re-run did not finish within {timeout} s"
    elif proc.returncode != 0:
        why = f"the re-run's process stopped (exit {proc.returncode}) before or in this test"
    else:
        why = "the re-run never reached this test"
    for t in tests:  # a test the re-run never finished did not pass
        verdicts.setdefault(t, {"passed": False, "message": why})
    return verdicts


def default_workers():
    """How many notebooks to re-run at once: half the cores, at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


def verify(assignment, root=".", students=None, notebooks=None, workers=1):
    """Rows (student, notebook, grade_id, notebook passed, re-run passed, message) for every submitted test."""
    root = Path(root)
    jobs = []
    for student_dir in sorted(p for p in (root / "submitted").iterdir() if (p / assignment).is_dir()):
        if students is not None and student_dir.name not in students:
            continue
        for submitted in sorted((student_dir / assignment).glob("*.ipynb")):
            if notebooks is None or submitted.stem in notebooks:
                jobs.append((student_dir.name, submitted))

    def one(job):
        student, submitted = job
        source = root / "source" / assignment / submitted.name
        autograded = root / "autograded" / student / assignment / submitted.name
        graded = notebook_verdicts(nbformat.read(autograded, as_version=4)) if autograded.exists() else {}
        verdicts = verify_notebook(source, submitted)
        print(f"verified {student}/{submitted.name}", file=sys.stderr, flush=True)
        return [(student, submitted.stem, gid, graded.get(gid), v["passed"], v["message"]) for gid, v in verdicts.items()]

    with ThreadPoolExecutor(workers) as pool:  # each notebook runs in a process of its own
        return [row for rows in pool.map(one, jobs) for row in rows]


def disagreements(rows):
    """The rows where the autograded notebook and the clean re-run give different verdicts."""
    return [r for r in rows if r[3] is not None and r[3] != r[4]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", nargs="?")
    parser.add_argument("--student", action="append", help="only this student (repeatable)")
    parser.add_argument("--workers", type=int, default=default_workers(), help="notebooks re-run at once")
    parser.add_argument("--child", nargs=2, metavar=("NOTEBOOK", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _run_child(*args.child)
    if not args.assignment:
        parser.error("name the assignment, e.g. python -m course.grading.verify grayscale")
    rows = verify(args.assignment, students=args.student, workers=args.workers)
    bad = disagreements(rows)
    never = [r for r in rows if r[3] is None]
    print(f"{len(rows)} tests re-run in clean processes; {len(bad)} disagree with the autograded notebooks")
    for student, nb, grade_id, graded, rerun, message in bad:
        print(f"  {student}  {nb}/{grade_id}: notebook {'passed' if graded else 'failed'}, "
              f"clean re-run {'passed' if rerun else 'failed'}: {message.splitlines()[0] if message else ''}")
    if never:
        print(f"{len(never)} tests have no autograded notebook to compare with (run nbgrader autograde first)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Re-verification outside nbgrader: every submission's answers re-checked where no student code runs, against the notebook's score.

A student's cell runs in the same Python as the test cells after it, so it can redefine a check
(`check_rgb2grey = lambda *a: None`), patch the course package or PyTorch. Here a student's submitted
notebooks run again in fresh processes, built from the instructor's source with the seeds as written or
the student's own: a worker per notebook runs its cells (only the solution cells come from the student)
and nothing else; one judge runs each test cell's check from the installed package, asking the worker
only for the student's answer: a Python function is called in the worker on the judge's inputs and its output
comes back, a CUDA source comes back as text and is compiled and run by the judge's own child
processes. Any test whose verdict differs from the autograded notebook's is reported.
"""
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

from ..cell_roles import is_demo, is_test_cell
from ..nbgrader.seeds import personal_notebook
from ..nbgrader.trusted import Answers, answer, decode, encode, judge_cell

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
    """{grade_id: True if the autograded notebook gave the test cell full marks, or judged a speed test (its share of
    the points is a timing, which a re-run measures anew: only whether it was timed can be compared)}."""
    from ..nbgrader.trusted import SPEED_RECORD
    out = {}
    for cell in autograded_nb.cells:
        if is_test_cell(cell):
            score, most = determine_grade(cell)
            timed = any(SPEED_RECORD in o.get("metadata", {}) for o in cell.get("outputs", []))
            out[_meta(cell)["grade_id"]] = score == most or timed
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
            if cell.cell_type != "code" or is_demo(cell) or ("gpu" in tags and not torch.cuda.is_available()):
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


def verification_source(root, assignment, student, secret, tmp):
    """Where a student's re-run takes its tests from: source/<assignment>/, or with a secret a copy in tmp with their seeds."""
    src = Path(root) / "source" / assignment
    if secret is None:
        return src
    out = Path(tmp) / "source" / assignment
    out.mkdir(parents=True)
    for p in src.iterdir():
        if p.suffix == ".ipynb":
            nbformat.write(personal_notebook(nbformat.read(p, as_version=4), student, secret), out / p.name)
        else:
            (out / p.name).symlink_to(p.resolve())
    return out


def _judge(folder, jobs, timeout):
    """Re-runs merged notebooks [(notebook, result file)] in one fresh judge process in folder: why it stopped, or None."""
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="ignore")
    cmd = [sys.executable, "-m", "course.grading.run.verify", "--child", str(folder), *[str(x) for job in jobs for x in job]]
    try:
        proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"the re-run did not finish within {timeout} s"
    return f"the re-run's process stopped (exit {proc.returncode}) before or in this test" if proc.returncode else None


def _judge_child(folder, pairs):
    """The judge process: re-runs each (merged notebook, result file), marking each done with why it stopped, if it did."""
    for nb_path, result in zip(pairs[::2], pairs[1::2]):
        os.chdir(folder)
        why = ""
        try:
            _run_child(nb_path, result)
        except BaseException as e:  # noqa: B902 (the notebook's tests that have no verdict yet fail, saying why)
            why = f"the re-run stopped before or in this test ({type(e).__name__}: {e})"[:500]
        Path(f"{result}.done").write_text(why)


def _verdicts(nb_path, result, stopped):
    """A re-run notebook's {grade_id: verdict}: each test it did not finish failed, saying why."""
    done = Path(f"{result}.done")
    verdicts = json.loads(Path(result).read_text()) if Path(result).exists() else {}
    why = (done.read_text() if done.exists() else stopped) or "the re-run never reached this test"
    for cell in nbformat.read(nb_path, as_version=4).cells:
        if is_test_cell(cell):
            verdicts.setdefault(_meta(cell)["grade_id"], {"passed": False, "message": why})
    return verdicts


def verify_student(root, assignment, student, secret=None, notebooks=None, timeout=NOTEBOOK_TIMEOUT):
    """One student's rows: their notebooks re-run in clean processes, with their seeds from secret (None: as written)."""
    root = Path(root)
    rows = []
    with tempfile.TemporaryDirectory(prefix="course-verify-") as tmp:
        source = verification_source(root, assignment, student, secret, tmp)
        jobs = []
        for submitted in sorted((root / "submitted" / student / assignment).glob("*.ipynb")):
            if (source / submitted.name).exists() and (notebooks is None or submitted.stem in notebooks):
                nb_path, result = Path(tmp) / f"{submitted.stem}.merged.ipynb", Path(tmp) / f"{submitted.stem}.json"
                nbformat.write(merged(nbformat.read(source / submitted.name, as_version=4),
                                      nbformat.read(submitted, as_version=4)), nb_path)
                jobs.append((submitted.stem, nb_path, result))
        # One judge for all of them; a notebook it did not finish is re-run alone, in a judge of its own
        _judge(source, [(nb, res) for _, nb, res in jobs], timeout * max(1, len(jobs)))
        for notebook, nb_path, result in jobs:
            stopped = None if Path(f"{result}.done").exists() else _judge(source, [(nb_path, result)], timeout)
            autograded = root / "autograded" / student / assignment / f"{notebook}.ipynb"
            graded = notebook_verdicts(nbformat.read(autograded, as_version=4)) if autograded.exists() else {}
            rows += [(student, notebook, gid, graded.get(gid), v["passed"], v["message"])
                     for gid, v in _verdicts(nb_path, result, stopped).items()]
    return rows


def default_workers():
    """How many students to re-run at once: half the cores, at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


def verify(assignment, root=".", students=None, notebooks=None, workers=1, secret=None):
    """Rows (student, notebook, grade_id, notebook passed, re-run passed, message) of every submitted test (secret: as verify_student)."""
    root = Path(root)
    found = sorted(p.name for p in (root / "submitted").iterdir()
                   if (p / assignment).is_dir() and (students is None or p.name in students))

    def one(student):
        rows = verify_student(root, assignment, student, secret, notebooks)
        print(f"verified {student}", file=sys.stderr, flush=True)
        return rows

    with ThreadPoolExecutor(workers) as pool:  # each student's notebooks run in processes of their own
        return [row for rows in pool.map(one, found) for row in rows]


def disagreements(rows):
    """The rows where the autograded notebook and the clean re-run give different verdicts."""
    return [r for r in rows if r[3] is not None and r[3] != r[4]]


def disagreement_line(row):
    """A disagreeing row as the instructor reads it: who, which test, both verdicts, the re-run's message."""
    student, notebook, grade_id, graded, rerun, message = row
    return (f"{student}  {notebook}/{grade_id}: notebook {'passed' if graded else 'failed'}, clean re-run "
            f"{'passed' if rerun else 'failed'}: {message.splitlines()[0] if message else ''}")


if __name__ == "__main__":  # python -m course.grading.run.verify --child FOLDER NOTEBOOK RESULT [NOTEBOOK RESULT ...]
    _judge_child(sys.argv[2], sys.argv[3:])

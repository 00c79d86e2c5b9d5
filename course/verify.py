"""Re-verification outside nbgrader: every submission's answers re-checked in clean processes, against the notebook's score.

A student's cell runs in the same Python as the test cells after it, so it can redefine a check
(`check_rgb2grey = lambda *a: None`) or patch the course package. Here each submitted notebook
runs again in a fresh process built from the instructor's source: only the solution cells come
from the student, and before every other cell the course package is put back as it was imported.
Any test whose verdict differs from the autograded notebook's is reported.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbgrader.utils import determine_grade, is_grade, is_solution

NOTEBOOK_TIMEOUT = 1800  # seconds for one notebook's re-run: compiles and checks included


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


def is_test(cell):
    """True for an autograded test cell (graded, not a solution)."""
    return cell.cell_type == "code" and is_grade(cell) and not is_solution(cell)


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
        if is_test(cell):
            score, most = determine_grade(cell)
            out[_meta(cell)["grade_id"]] = score == most
    return out


def _course_modules():
    return {name: mod for name, mod in sys.modules.items()
            if name == "course" or name.startswith("course.")}


def _run_child(nb_path, result_path):
    """Runs a merged notebook in this (fresh) process and writes each test cell's verdict as JSON."""
    from IPython.core.interactiveshell import InteractiveShell

    import course  # noqa: F401 (imported before any student code, to be restored from)
    import course.checks  # noqa: F401
    import course.autograde, course.isolation, course.cuda, course.ladder  # noqa: E401, F401

    pristine = {name: dict(vars(mod)) for name, mod in _course_modules().items()}
    shell = InteractiveShell.instance()
    nb = nbformat.read(nb_path, as_version=4)
    verdicts = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "demo" in cell.metadata.get("tags", []):
            continue  # a demo cell only shows the student's function at work; the tests call it themselves
        if not is_solution(cell):
            for name, mod in _course_modules().items():
                if name in pristine:
                    vars(mod).clear()
                    vars(mod).update(pristine[name])
            exported = pristine["course"]
            for name in exported.get("__all__", []):  # names the lesson imported from course
                if name in shell.user_ns:
                    shell.user_ns[name] = exported[name]
        result = shell.run_cell(cell.source, store_history=False)
        if is_test(cell):
            error = result.error_in_exec or result.error_before_exec
            verdicts[_meta(cell)["grade_id"]] = {
                "passed": error is None,
                "message": "" if error is None else f"{type(error).__name__}: {error}"[:2000]}
            Path(result_path).write_text(json.dumps(verdicts))  # kept if a later cell kills the process


def verify_notebook(source_path, submitted_path, timeout=NOTEBOOK_TIMEOUT):
    """Re-runs a submitted notebook's answers against the source's tests in a fresh process: {grade_id: verdict}."""
    source_nb = nbformat.read(source_path, as_version=4)
    submitted_nb = nbformat.read(submitted_path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="course-verify-") as tmp:
        nb_path, result = Path(tmp) / "merged.ipynb", Path(tmp) / "verdicts.json"
        nbformat.write(merged(source_nb, submitted_nb), nb_path)
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="ignore")
        try:
            proc = subprocess.run([sys.executable, "-m", "course.verify", "--child", str(nb_path), str(result)],
                                  cwd=Path(source_path).parent, env=env, capture_output=True, text=True,
                                  errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired:
            proc = None
        tests = [_meta(c)["grade_id"] for c in source_nb.cells if is_test(c)]
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
        parser.error("name the assignment, e.g. python -m course.verify grayscale")
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

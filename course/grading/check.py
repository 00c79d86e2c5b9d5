"""`course check NAME`: an assignment tried while it is written, without releasing or grading anything: what `course
release` would refuse, and answers run through their exercises' checks, each test's verdict and message in a table.

An answer is a solution cell's code (`<grade_id>.py`, as examples/ and the corpus hold them), a folder of those (an
example student), or a notebook. It runs as the corpus runs it (tests/test_corpus.py): the source notebook's cells in
order in this process, the answer in its solution cells, demo and `gpu` cells left out, then the exercise's test
cells with the course's checks (CUDA and Triton in their sandboxed children). It is a trial for the instructor, not
a grade: `course grade` judges a submission outside every process the student's code runs in.
"""
import contextlib
import io
import json
import linecache
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from ..assignments import Assignment
from .layout import CourseError, course_root, require_assignment
from .publish import release_refusals
from .seeds import is_test_cell
from .trusted import check_call, is_demo


def source_cells(assignment, notebook, answers, wanted):
    """[(test grade_id or None, code)] in the order a source notebook runs them: each solution cell replaced by its
    answer where answers has one, demo and `gpu` cells left out, only the test cells wanted(grade_id, check call)."""
    nb = nbformat.read(assignment.root / "source" / assignment.name / f"{notebook}.ipynb", as_version=4)
    out = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or is_demo(cell) or "gpu" in cell.metadata.get("tags", []):
            continue
        code = re.sub(r"^%%?time +", "", cell.source, flags=re.M)  # %time is IPython's; the rest is Python
        if is_test_cell(cell):
            if wanted(meta["grade_id"], check_call(cell.source)):
                out.append((meta["grade_id"], code))
        else:
            out.append((None, answers.get(meta.get("grade_id"), code) if meta.get("solution") else code))
    return out


def run_cells(cells, label, namespace=None):
    """Runs cells in one namespace: ({test: {"passed", "message"}}, [(cell index, error) of the other cells])."""
    import matplotlib.pyplot as plt
    ns = {"__name__": "__main__"} if namespace is None else namespace
    verdicts, errors = {}, []
    for k, (test, code) in enumerate(cells):
        name = f"<{label}:{test or 'cell'}:{k}>"
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)  # as IPython does: inspect reads it
        try:
            exec(compile(code, name, "exec"), ns)
            passed, message = True, ""
        except Exception as e:
            passed, message = False, f"{type(e).__name__}: {e}"
        finally:
            plt.close("all")
        if test is not None:
            verdicts[test] = {"passed": passed, "message": message}
        elif not passed:
            errors.append((k, message))
    return verdicts, errors


def read_answers(assignment, path, exercise=None):
    """{solution grade_id: code} from a `<grade_id>.py` (or any file, for exercise), a folder of them, or a notebook's
    solution cells; with exercise, only that one."""
    path = Path(path)
    solutions = {e.grade_id for e in assignment.exercises().values()}
    if exercise is not None and exercise not in solutions:
        raise CourseError(f"{assignment.name} has no exercise {exercise}: its exercises are {', '.join(sorted(solutions))}")
    if path.is_dir():
        answers = {p.stem: p.read_text() for p in sorted(path.glob("*.py"))}
    elif path.suffix == ".ipynb":
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as e:
            raise CourseError(f"{path} is not a notebook nbformat can read: {e}") from None
        answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
                   if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    elif path.is_file():
        answers = {exercise or path.stem: path.read_text()}
    else:
        raise CourseError(f"{path}: no such file or folder")
    known = {g: code for g, code in answers.items() if g in solutions and exercise in (None, g)}
    if not known:
        raise CourseError(f"{path} holds no answer to an exercise of {assignment.name}: name a file after the solution "
                          f"cell it fills (<grade_id>.py), or pass --exercise. Its exercises: {', '.join(sorted(solutions))}")
    return known


def released_stubs(assignment):
    """{solution grade_id: its cell as `course release` leaves it} (the stub a student starts from), release not run."""
    from .release import ClearCudaSolutions
    out = {}
    for path in assignment.notebooks:
        nb, _ = ClearCudaSolutions().preprocess(nbformat.read(path, as_version=4), {"language": "python"})
        out.update({c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
                    if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")})
    return out


def try_answers(assignment, answers, tests=None, progress=print):
    """{(exercise, test): verdict} of the answers' exercises, each notebook run once; tests names the tests to run
    (default: all but speed). progress gets a line per notebook, and one per instructor cell that raised; what the
    cells print is not shown."""
    exercises = [e for e in assignment.exercises().values() if e.grade_id in answers]
    by_test = {e.prefix + t: (e.grade_id, t) for e in exercises for t in e.tests}
    results = {}
    for notebook in dict.fromkeys(e.notebook for e in exercises):
        def wanted(gid, call):
            return gid in by_test and (by_test[gid][1] in tests if tests else "speed" not in call[2])
        cells = source_cells(assignment, notebook, answers, wanted)
        n = sum(t is not None for t, _ in cells)
        progress(f"{assignment.name}/{notebook}: {n} test{'' if n == 1 else 's'}")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            verdicts, errors = run_cells(cells, f"{assignment.name}/{notebook}")  # the lesson's and checks' prints
        for k, message in errors:
            progress(f"  a cell of the notebook (code cell {k} of those run) raised {message.splitlines()[0][:200]}")
        results.update({by_test[gid]: v for gid, v in verdicts.items()})
    return results


def example_results(assignment, student, tests=(), progress=print):
    """try_answers for an example student, as `make grade` submits them: a solution cell without a file of theirs
    keeps the released stub."""
    files = {p.stem: p.read_text() for p in sorted((assignment.root / "examples" / assignment.name / student).glob("*.py"))}
    return try_answers(assignment, {**released_stubs(assignment), **files}, tests, progress)


def table(results, width=100):
    """The verdicts as a plain-text table: exercise, test, verdict and the message's first lines."""
    rows = [("exercise", "test", "verdict", "message")]
    for (exercise, test), v in results.items():
        rows.append((exercise, test, "passed" if v["passed"] else "FAILED",
                     " ".join(v["message"].split())[:width]))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in rows)


def expected_losses(assignment):
    """{student: {"notebook/grade_id", ...}} that examples/<a>/expected.json says each example student loses, or None."""
    path = assignment.root / "examples" / assignment.name / "expected.json"
    if not path.is_file():
        return None
    try:
        return {s: set(v) for s, v in json.loads(path.read_text()).items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise CourseError(f"{path}: not a JSON object of student -> [notebook/grade_id, ...] ({e})") from None


def check(root, name, answer=None, exercise=None, tests=None, corpus=True):
    """`course check`: 0 when the assignment could be released and every answer tried got the verdicts expected."""
    root = course_root(root)
    require_assignment(root, name)
    assignment = Assignment(name, root)
    tests = tuple(tests or ())
    if answer is not None:
        answers = read_answers(assignment, answer, exercise)
        _known_tests(assignment, answers, tests)
        results = try_answers(assignment, answers, tests)
        print(table(results))
        for (e, t), v in results.items():
            if not v["passed"]:
                print(f"\n{e} {t}:\n  " + v["message"].replace("\n", "\n  "))
        failed = sum(not v["passed"] for v in results.values())
        print(f"{len(results) - failed} of {len(results)} tests passed" + ("" if tests else " (speed tests left out: "
              "--case speed runs them)"))
        return 1 if failed else 0
    if exercise is not None:
        raise CourseError("--exercise names the exercise an --answer fills: pass --answer too")
    _known_tests(assignment, assignment.exercises(), tests)
    refusals = release_refusals(root, name) + assignment.repository_problems()
    for line in refusals:
        print("PROBLEM " + line)
    if refusals:
        print("the examples and the corpus are not run until these are fixed")
        return 1
    print(f"{name}: declared whole ({len(assignment.notebooks)} notebooks, {len(assignment.exercises())} "
          "exercises); `course release` would accept it")
    wrong = 0
    expected = expected_losses(assignment)
    for student in assignment.students():
        results = example_results(assignment, student, tests, progress=lambda line: print("  " + line))
        exercises = assignment.exercises()
        ran = {(e, t): f"{exercises[e].notebook}/{exercises[e].prefix}{t}" for e, t in results}
        lost = {ran[k] for k, v in results.items() if not v["passed"]}
        verdict = ""
        if expected is not None:
            declared = expected.get(student, set()) & set(ran.values())  # the tests left out (speed) are not judged
            surprise = sorted(lost ^ declared)
            wrong += bool(surprise)
            verdict = " as expected.json says" if not surprise else \
                " NOT as expected.json says: " + ", ".join(f"{x} ({'lost' if x in lost else 'passed'})" for x in surprise)
        print(f"example student {student}: lost {len(lost)} of {len(results)} tests{verdict}")
        print("  " + table(results).replace("\n", "\n  "))
    return 1 if wrong or (corpus and run_corpus(root, name)) else 0


def run_corpus(root, name):
    """Runs the assignment's corpus (tests/test_corpus.py's runner, its table printed as it goes); its exit status."""
    if not (root / "tests" / "test_corpus.py").is_file():
        print(f"the corpus: this course folder has no tests/test_corpus.py to run tests/corpus/{name}/ with; left out")
        return 0
    print(f"the corpus: python -m tests.test_corpus --topic {name}", flush=True)
    t = time.perf_counter()
    rc = subprocess.call([sys.executable, "-m", "tests.test_corpus", "--topic", name], cwd=root)
    print(f"the corpus {'gave every answer the verdicts it declares' if rc == 0 else 'FAILED'} "
          f"({time.perf_counter() - t:.0f} s)")
    return rc


def _known_tests(assignment, answers, tests):
    """Refuses a --case that none of the answers' exercises has (answers: a dict keyed by exercise)."""
    exercises = [e for e in assignment.exercises().values() if e.grade_id in answers]
    known = {t for e in exercises for t in e.tests}
    unknown = sorted(set(tests) - known)
    if unknown:
        raise CourseError(f"no test {', '.join(unknown)} in {', '.join(e.grade_id for e in exercises)}; the tests there: "
                          f"{', '.join(sorted(known))}")

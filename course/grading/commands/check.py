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

from ...assignments import Assignment
from ..run.layout import CourseError, course_root, require_assignment
from .release import release_refusals
from ..cell_roles import check_call, is_demo, is_test_cell


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
    from ..nbgrader.release import ClearCudaSolutions
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


# ---- what the memory and race checks can show: the solution, with what each looks for taken out ----------------------
BARRIER = re.compile(r"__syncthreads\(\)\s*;")
GUARD = re.compile(r"\bif\s*\(((?:[^()]|\([^()]*\))*?(?<![<>])[<>]=?(?![<>])(?:[^()]|\([^()]*\))*)\)(\s*return\b)?")
MUTANTS = {"race": "the __syncthreads()", "memory": "the guard"}


def mutants(mode, code):
    """[(line, mutant)] of a CUDA solution with one thing its mode's check looks for taken out: a barrier
    (race), or a guard in a kernel (memory: an `if (... < ...)` made always true, an `if (... >= ...) return` never)."""
    if mode == "race":
        return [(code[:m.start()].count("\n") + 1, code[:m.start()] + code[m.end():]) for m in BARRIER.finditer(code)]
    out, kernels = [], _kernel_spans(code)
    for m in GUARD.finditer(code):
        if not any(a <= m.start() < b for a, b in kernels):
            continue  # the host code's (`if (n > 0)` around a launch), or Python's
        cond = "false" if m.group(2) else "true"
        out.append((code[:m.start()].count("\n") + 1, f"{code[:m.start(1)]}{cond}{code[m.end(1):]}"))
    return out


def _kernel_spans(code):
    """[(start, end)] of each __global__ function's body in a CUDA source."""
    spans = []
    for m in re.finditer(r"__global__\b", code):
        start = code.find("{", m.end())
        depth, k = 0, start
        while 0 <= k < len(code):
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            if depth == 0:
                spans.append((start, k))
                break
            k += 1
    return spans


@contextlib.contextmanager
def _probing(mode, name, seen):
    """Every Exercise's `mode` check runs the sizes of case `name` (None: its own), and seen gets the Exercise."""
    from ...harness.exercise import Exercise
    own = Exercise.probed

    def probed(self, m):
        if m == mode:
            seen.append(self)
            if name is not None:
                return (name,)
        return own(self, m)
    Exercise.probed = probed
    try:
        yield
    finally:
        Exercise.probed = own


def probe_problems(assignment, progress=print, only=None):
    """What an exercise's memory and race checks cannot show: its solution with each guard (memory) or barrier
    (race) taken out in turn, through that check alone. A mutant the check passes is a problem line, naming the
    exercise's other sizes that would catch it (tried as the probe) or saying none does. only: those solution
    grade_ids."""
    from ...harness.rungs import CUDA
    problems = []
    for e in assignment.exercises().values():
        if only is not None and e.grade_id not in only:
            continue
        sources, modes = _sources(assignment, e.notebook), {}
        for test in e.tests:
            args = check_call(sources[e.prefix + test])[2]
            if args and args[0] in MUTANTS:
                modes[args[0]] = e.prefix + test
        if not modes:
            continue
        solution = sources[e.grade_id]
        cells = source_cells(assignment, e.notebook, {e.grade_id: solution}, lambda gid, call: gid in modes.values())
        at = next(k for k, (_, code) in enumerate(cells) if code is solution)
        label = f"{assignment.name}/{e.notebook}"
        ns = {"__name__": "__main__"}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            verdicts, _ = run_cells(cells, label, ns)
        for mode, gid in modes.items():
            if not verdicts[gid]["passed"]:
                problems.append(f"{e.notebook}/{gid}: the solution fails its own {mode} check: "
                                f"{verdicts[gid]['message'].splitlines()[0][:300]}")
                continue
            test = next(code for t, code in cells if t == gid)
            found = mutants(mode, solution)
            noun = "barrier" if mode == "race" else "guard"
            some = {0: f"has no {noun} in a CUDA kernel to take out", 1: f"with its {noun} taken out"}.get(
                len(found), f"with each of its {len(found)} {noun}s taken out")
            progress(f"{label}: {gid}: the solution {some}")
            for line, mutant in found:
                seen = []  # the Exercise the check ran
                if _caught(label, ns, solution, mutant, gid, test, mode, None, seen):
                    continue
                own = seen[0].probed(mode) if seen else ()
                others = [c for c in (seen[0].case_names[CUDA.sizes] if seen else ()) if c not in own and c != "random"]
                would = [c for c in others if _caught(label, ns, solution, mutant, gid, test, mode, c, [])]
                problems.append(
                    f"{e.notebook}/{gid}: the {mode} check cannot show a missing {MUTANTS[mode][4:]}: the solution with "
                    f"{MUTANTS[mode]} on line {line} of its cell taken out passes it on the {', '.join(own)} sizes; " +
                    (f"the {would[0]} sizes would catch it (probe={would[0]!r} on the topic's Exercise"
                     + (", or edges" if mode == "memory" else "") + ")" if would else
                     "none of its other sizes would: add a case " +
                     ("with a block of several warps and several tiles (a race inside one warp goes unseen)"
                      if mode == "race" else "whose size is not a multiple of the block (threads past the end)")))
    return problems


def _sources(assignment, notebook):
    """{grade_id: source} of a source notebook's cells that have one."""
    nb = assignment.read(assignment.root / "source" / assignment.name / f"{notebook}.ipynb")
    return {c["metadata"]["nbgrader"]["grade_id"]: c["source"] if isinstance(c["source"], str) else "".join(c["source"])
            for c in nb["cells"] if "grade_id" in c.get("metadata", {}).get("nbgrader", {})}


def _caught(label, ns, solution, mutant, gid, test, mode, probe, seen):
    """Whether the check in test fails `mutant` put in place of the solution (probe: the case its mode runs instead of
    its own), the notebook's namespace ns restored to the solution's after."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            _probing(mode, probe, seen):
        verdicts, _ = run_cells([(None, mutant), (gid, test)], label, ns)
        run_cells([(None, solution)], label, ns)
    return not verdicts[gid]["passed"]


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


def check(root, name, answer=None, exercise=None, tests=None, corpus=True, probes=True):
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
    blind = probe_problems(assignment, progress=lambda line: print("  " + line)) if probes else []
    for line in blind:
        print("PROBLEM " + line)
    if probes:
        print(f"the memory and race checks: {len(blind)} cannot show what they look for" if blind else
              "the memory and race checks: each catches its solution with a guard or a barrier taken out")
    wrong = len(blind)
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

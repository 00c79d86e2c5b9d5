"""The grading corpus: each known-wrong answer loses points for its own reason, each right one gets full marks.

Every answer in tests/corpus/grayscale/ meets the test cells of the instructor's notebook (hidden
tests included), the way nbgrader runs them: the answer's cell, then each test cell's code, with
the course's checks. CUDA answers run on the GPU where there is one and in CPU mode elsewhere.
`python -m tests.test_corpus [--cuda] [--report DIR]` prints the table of verdicts
(`COURSE_REPORT_DIR` does the same for the test run).
"""
import argparse
import importlib.util
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
import pytest
import torch

import course
from course.device import cpu_mode
from course.verify import is_test

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "grayscale"
NOTEBOOK = {"rgb2grey_py": "01_L0_loop", "rgb2grey_k": "02_L1_run_kernel", "rgb2grey_bk": "03_L2_blk_kernel",
            "rgb_to_grayscale_cuda": "04_L3_cuda"}
CPP_SRC = "torch::Tensor rgb_to_grayscale(torch::Tensor input);"


def _load_cases():
    spec = importlib.util.spec_from_file_location("corpus_cases", CORPUS / "cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


CASES = _load_cases()


def is_cuda(case):
    return case.exercise == "rgb_to_grayscale_cuda"


def notebook_tests(exercise):
    """{test name: code} of the source notebook's test cells for an exercise, hidden tests included."""
    nb = nbformat.read(ROOT / "source" / "grayscale" / f"{NOTEBOOK[exercise]}.ipynb", as_version=4)
    cells = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells if is_test(c)}
    prefix = os.path.commonprefix(list(cells))  # e.g. rgb2grey_py_
    return {gid[len(prefix):]: src for gid, src in cells.items()}


def run_case(name):
    """{test: {"passed", "message"}} for one corpus answer, each test cell run as the grader would."""
    case = CASES[name]
    ns = {n: getattr(course, n) for n in course.__all__}
    ns["torch"] = torch
    answer = (CORPUS / name / f"{case.exercise}.py").read_text()
    verdicts = {}
    try:
        exec(compile(answer, f"<{name}>", "exec"), ns)
        if is_cuda(case):
            ns["module"] = course.load_cuda(ns["cuda_src"], CPP_SRC, ["rgb_to_grayscale"])
    except Exception as e:  # the answer does not even run or compile: every test fails
        return {t: {"passed": False, "message": f"{type(e).__name__}: {e}"} for t in notebook_tests(case.exercise)}
    for test, code in notebook_tests(case.exercise).items():
        try:
            exec(compile(code, f"<{name}:{test}>", "exec"), ns)
            verdicts[test] = {"passed": True, "message": ""}
        except Exception as e:
            verdicts[test] = {"passed": False, "message": f"{type(e).__name__}: {e}"}
    return verdicts


def run_corpus(names, workers, done=lambda results: None):
    """Verdicts of the named cases: CUDA ones in threads (compiles and child processes), Python ones here.

    done(results so far) is called after each case, e.g. to keep a report up to date.
    """
    cuda = [n for n in names if is_cuda(CASES[n])]
    results = {}
    with ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(run_case, n): n for n in cuda}
        for n in names:  # the Python answers here, in the main thread: their time limit needs it
            if not is_cuda(CASES[n]):
                results[n] = run_case(n)
                done(results)
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            done(results)
    return dict(sorted(results.items()))


def as_expected(name, got):
    """The ways a case's verdicts differ from what cases.py expects (empty when all agree)."""
    case, problems = CASES[name], []
    for test in sorted(set(case.fails) - set(got)):
        problems.append(f"{test}: no such test")
    for test, v in got.items():
        if test in case.fails and v["passed"]:
            problems.append(f"{test}: passed, should fail ({case.fails[test]!r})")
        elif test in case.fails and case.fails[test] not in v["message"]:
            problems.append(f"{test}: failed for another reason: {v['message'][:300]}")
        elif test not in case.fails and not v["passed"]:
            problems.append(f"{test}: failed, should pass: {v['message'][:300]}")
    return problems


def report(results, folder):
    """Writes corpus.json and corpus.md (a table of cases and verdicts) into folder."""
    where = "CPU mode" if cpu_mode() else f"GPU ({torch.cuda.get_device_name()})"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.json").write_text(json.dumps({"where": where, "verdicts": results}, indent=1))
    lines = [f"Verdicts on {where}", "", "| case | what | tests failed | as expected |", "|---|---|---|---|"]
    for name in sorted(results):
        failed = [t for t, v in results[name].items() if not v["passed"]]
        problems = as_expected(name, results[name])
        lines.append(f"| {name} | {CASES[name].what} | {', '.join(failed) or 'none: full marks'} | "
                     f"{'yes' if not problems else 'NO: ' + '; '.join(problems)} |")
    (folder / "corpus.md").write_text("\n".join(lines) + "\n")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def verdicts():
    results = run_corpus(sorted(CASES), workers=max(2, min(8, (os.cpu_count() or 2) // 2)))
    if os.environ.get("COURSE_REPORT_DIR"):
        report(results, os.environ["COURSE_REPORT_DIR"])
    return results


def test_the_corpus_is_big_and_varied_enough():
    cuda = [c for c in CASES.values() if is_cuda(c)]
    python = [c for c in CASES.values() if not is_cuda(c)]
    assert sum(bool(c.fails) for c in cuda) >= 20 and sum(not c.fails for c in cuda) >= 8
    assert sum(bool(c.fails) for c in python) >= 8 and sum(not c.fails for c in python) >= 3
    assert len({c.what for c in CASES.values()}) == len(CASES), "each case a distinct mistake or style"
    for name, case in CASES.items():
        assert (CORPUS / name / f"{case.exercise}.py").exists(), name


def test_every_exercise_has_its_test_cells():
    assert set(notebook_tests("rgb2grey_py")) == {"tiny", "ragged_sizes", "tall_and_wide", "photo", "hidden_sizes"}
    assert set(notebook_tests("rgb_to_grayscale_cuda")) == {
        "tiny", "ragged_sizes", "tall_and_wide", "photo", "large", "hidden_sizes", "memory", "integrity"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_answer_gets_the_verdicts_it_deserves(verdicts, name):
    assert not as_expected(name, verdicts[name]), "\n".join(as_expected(name, verdicts[name]))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Runs the grading corpus and prints its table of verdicts.")
    parser.add_argument("--cuda", action="store_true", help="only the CUDA answers")
    parser.add_argument("--report", default=os.environ.get("COURSE_REPORT_DIR", "."), help="folder for corpus.md/json")
    parser.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)))
    args = parser.parse_args(argv)
    names = [n for n in sorted(CASES) if is_cuda(CASES[n]) or not args.cuda]
    results = run_corpus(names, args.workers, done=lambda r: report(r, args.report))
    print(report(results, args.report))
    return 1 if any(as_expected(n, r) for n, r in results.items()) else 0


if __name__ == "__main__":
    sys.exit(main())

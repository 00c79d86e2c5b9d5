"""The grading corpus: each known-wrong answer loses points for its own reason, each right one gets full marks.

tests/corpus/<topic>/cases.py lists the answers of one topic (a folder per answer, `<exercise>.py` holding
the whole solution cell) and the verdicts each must get. An answer meets its notebook as the grader runs
it: the instructor's cells in order with the answer in its solution cell (demo and `gpu` cells left out),
then every test cell of that exercise, hidden tests included, with the course's checks. CUDA and Triton answers
run on the GPU where there is one and in CPU mode elsewhere (CUDA built by g++, Triton in its interpreter).
`python -m tests.test_corpus [--topic T] [--rung R] [--cuda] [--report DIR]` prints the table of verdicts
(`COURSE_REPORT_DIR` does the same for the test run).
"""
import argparse
import importlib.util
import io
import json
import os
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pytest
import torch

import course
from course.assignments import Assignment
from course.device import cpu_mode
from course.grading.commands.check import run_cells, source_cells
from course.harness import children as harness_children
from course.harness import python as harness_python
from course.harness.rungs import PYTHON, RUNGS
from tests.corpus.answers import ANY
from tests.support import ROOT


HANG_CHILD_LIMIT = 20  # seconds a child running an answer expected to hang is given (the course's: 60)
CHILD_LIMIT = 240  # seconds for any other answer's child: a verdict, not a timing (60 s stopped a right answer in CI)
HANG_LIMIT = 3  # seconds a test gives a Python answer expected to loop forever (any limit shows it; others keep theirs)
CORPUS = ROOT / "tests" / "corpus"
TOPICS = sorted(p.name for p in CORPUS.iterdir() if (p / "cases.py").exists())


def _load(topic):
    spec = importlib.util.spec_from_file_location(f"corpus_{topic}", CORPUS / topic / "cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPECS = {t: _load(t) for t in TOPICS}
EXERCISES = {t: Assignment(t, ROOT).exercises() for t in TOPICS}  # solution grade_id -> its notebook and test cells
CASES = {f"{t}/{name}": case for t in TOPICS for name, case in SPECS[t].CASES.items()}
# The fewest known-wrong and known-right answers a topic's corpus holds for each rung its exercises use.
LEAST = {"python": (5, 3), "cuda": (15, 6), "triton": (10, 4)}


def exercise_rung(topic, exercise):
    """The Rung whose checks judge an exercise (its test cells' checks say which); PYTHON for a plain value."""
    kinds = {getattr(course, check).answer_kind for check in EXERCISES[topic][exercise].checks}
    return next((r for r in RUNGS.values() if r.answer.name in kinds), PYTHON)


def rung_of(key):
    """The Rung of a corpus answer's exercise."""
    return exercise_rung(key.split("/")[0], CASES[key].exercise)


def notebook_cells(topic, exercise, answer):
    """(test name, or None for any other cell, code) in the order the exercise's notebook runs them, speed tests left
    out (tests/speed's attacks and test_speed.py judge those)."""
    e = EXERCISES[topic][exercise]
    return [(gid and gid[len(e.prefix):], code) for gid, code in source_cells(
        Assignment(topic, ROOT), e.notebook, {exercise: answer},
        lambda gid, call: gid.startswith(e.prefix) and "speed" not in call[2])]


_running = threading.local()  # .key: the answer this thread runs, for Labelled


class Labelled(io.TextIOBase):
    """The runner's stdout: each line an answer's cells print starts with that answer, `grayscale/right_py: ...`,
    and is written whole (the answers run in threads)."""

    def __init__(self, out):
        self.out, self.pending = out, threading.local()

    def write(self, text):
        key = getattr(_running, "key", None)
        if key is None:
            return self.out.write(text)
        *lines, self.pending.text = (getattr(self.pending, "text", "") + text).split("\n")
        if lines:
            self.out.write("".join(f"{key}: {line}\n" for line in lines))
        return len(text)

    def end(self):
        """Writes the line this thread's answer left unfinished."""
        if getattr(self.pending, "text", ""):
            self.write("\n")

    def flush(self):
        self.out.flush()


def run_case(key):
    """{test: {"passed", "message"}} for one corpus answer, its notebook run as the grader would."""
    topic, name = key.split("/")
    case = CASES[key]
    answer = (CORPUS / topic / name / f"{case.exercise}.py").read_text()
    _running.key = key
    try:
        return run_cells(notebook_cells(topic, case.exercise, answer), key)[0]
    finally:
        if isinstance(sys.stdout, Labelled):
            sys.stdout.end()
        _running.key = None


def hangs(key):
    """True for an answer expected to fail every test by never finishing."""
    fails = expected_failures(CASES[key])
    return bool(fails) and all(phrase is not ANY and "did not finish" in phrase for phrase in fails.values())


def run_corpus(keys, workers, done=lambda results: None):
    """Verdicts of the named cases: those whose rung runs them in children (CUDA, Triton) in threads, Python ones here.

    done(results so far) is called after each case, e.g. to keep a report up to date.
    """
    results = {}
    # The Python answers first, here in the main thread (their time limit needs it), and alone: the timer
    # drill measures sleeps, which threads holding the GIL would stretch.
    for k in keys:
        if not rung_of(k).children:
            with pytest.MonkeyPatch.context() as mp:
                if hangs(k):  # every test waits out its limit: a short one shows the same message sooner
                    mp.setattr(harness_python, "PYTHON_TIMEOUT", HANG_LIMIT)
                results[k] = run_case(k)
            done(results)
    # Then the ones that run in children: those that hang first, under a short limit (it shows the same message
    # sooner), the others under a long one: under load in CI, 20 s stopped a right Triton answer's memory check and
    # the course's 60 s a CUDA answer's photo check (2 cores, the build tests compiling beside it)
    children = [k for k in keys if rung_of(k).children]
    for group, limit in (([k for k in children if hangs(k)], HANG_CHILD_LIMIT),
                         ([k for k in children if not hangs(k)], CHILD_LIMIT)):
        with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(workers) as pool:
            mp.setattr(harness_children, "TIMEOUT", limit)
            futures = {pool.submit(run_case, k): k for k in group}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                done(results)
    return dict(sorted(results.items()))


def expected_failures(case):
    """{test: phrase} a case must fail here: its own for this mode where a race makes the modes differ."""
    mode = "cpu" if cpu_mode() else "gpu"
    own = getattr(case, mode, None)
    return case.fails if own is None else own


def as_expected(key, got):
    """The ways a case's verdicts differ from what cases.py expects (empty when all agree)."""
    problems = []
    fails = expected_failures(CASES[key])
    for test in sorted(set(fails) - set(got)):
        problems.append(f"{test}: no such test")
    for test, v in got.items():
        if test in fails and fails[test] is ANY:
            continue
        if test in fails and v["passed"]:
            problems.append(f"{test}: passed, should fail ({fails[test]!r})")
        elif test in fails and fails[test] not in v["message"]:
            problems.append(f"{test}: failed for another reason: {v['message'][:300]}")
        elif test not in fails and not v["passed"]:
            problems.append(f"{test}: failed, should pass: {v['message'][:300]}")
    return problems


def report(results, folder):
    """Writes corpus.json and corpus.md (a table of cases and verdicts) into folder."""
    where = "CPU mode" if cpu_mode() else f"GPU ({torch.cuda.get_device_name()})"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.json").write_text(json.dumps({"where": where, "verdicts": results}, indent=1))
    lines = [f"Verdicts on {where}", "", "| case | what | tests failed | as expected |", "|---|---|---|---|"]
    for key in sorted(results):
        failed = [t for t, v in results[key].items() if not v["passed"]]
        problems = as_expected(key, results[key])
        lines.append(f"| {key} | {CASES[key].what} | {', '.join(failed) or 'none: full marks'} | "
                     f"{'yes' if not problems else 'NO: ' + '; '.join(problems)} |")
    (folder / "corpus.md").write_text("\n".join(lines) + "\n")
    return "\n".join(lines)


def default_workers():
    """CUDA cases at once: the cores, two at least (each case is mostly a compile, then child processes)."""
    return max(2, min(12, os.cpu_count() or 2))


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def verdicts(request):
    # Only the answers whose test was selected (pytest -k rowsoftmax runs that topic's, as the module runner does)
    keys = sorted({item.callspec.params["key"] for item in request.session.items
                   if getattr(item, "originalname", None) == "test_each_answer_gets_the_verdicts_it_deserves"})
    # The answers that never end wait out the time limit; a shorter one gives the same verdicts, minutes sooner
    # (the slowest right answer, matmul's tiled with 8x8 tiles, took 22 s for its six tests in CPU mode with the
    # one-thread contract, one run on the 2-core machine; a CUDA check about 1 s).
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness_python, "PYTHON_TIMEOUT", 40)
        results = run_corpus(keys, workers=default_workers())
    if os.environ.get("COURSE_REPORT_DIR"):
        report(results, os.environ["COURSE_REPORT_DIR"])
    return results


pytestmark = [pytest.mark.xdist_group("corpus"), pytest.mark.timeout(3600)]


@pytest.mark.parametrize("topic", TOPICS)
def test_the_corpus_is_big_and_varied_enough(topic):
    cases = SPECS[topic].CASES
    wrong = lambda c: bool(expected_failures(c))  # noqa: E731
    short = []
    for rung in sorted({exercise_rung(topic, e).name for e in EXERCISES[topic]}):
        mine = [c for c in cases.values() if exercise_rung(topic, c.exercise).name == rung]
        for known, have, need in zip(("wrong", "right"), (sum(map(wrong, mine)), sum(not wrong(c) for c in mine)),
                                     LEAST[rung]):
            if have < need:
                short.append(f"{have} known-{known} {rung} answers (at least {need})")
    assert not short, f"tests/corpus/{topic}/cases.py lists too few answers: " + ", ".join(short)
    assert len({c.what for c in cases.values()}) == len(cases), "each case a distinct mistake or style"
    for name, case in cases.items():
        assert (CORPUS / topic / name / f"{case.exercise}.py").exists(), name
        assert case.exercise in EXERCISES[topic], name


@pytest.mark.parametrize("topic", TOPICS)
def test_every_exercise_has_test_cells(topic):
    for exercise in EXERCISES[topic]:
        assert [t for t, _ in notebook_cells(topic, exercise, "") if t], exercise


def test_runner_lines_name_their_answer():
    out = io.StringIO()
    labelled = Labelled(out)

    def answer(key):
        _running.key = key
        try:
            for _ in range(50):
                print("row_max:", "ragged passed", file=labelled)
            labelled.write("unfinished")
            labelled.end()
        finally:
            _running.key = None
    threads = [threading.Thread(target=answer, args=(f"drills/answer_{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("the table", file=labelled)
    lines = out.getvalue().splitlines()
    assert sorted(lines[:-1]) == sorted(f"drills/answer_{k}: {text}" for k in range(4)
                                        for text in ["row_max: ragged passed"] * 50 + ["unfinished"]), lines
    assert lines[-1] == "the table"


@pytest.mark.parametrize("key", sorted(CASES))
def test_each_answer_gets_the_verdicts_it_deserves(verdicts, key):
    assert not as_expected(key, verdicts[key]), "\n".join(as_expected(key, verdicts[key]))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Runs the grading corpus and prints its table of verdicts.")
    parser.add_argument("--topic", action="append", choices=TOPICS, help="only this topic (repeatable)")
    parser.add_argument("--rung", action="append", choices=sorted(RUNGS), help="only this rung's answers (repeatable)")
    parser.add_argument("--cuda", action="store_true", help="only the answers a GPU runs (every rung's but Python's)")
    parser.add_argument("--report", default=os.environ.get("COURSE_REPORT_DIR", Path(tempfile.gettempdir()) / "corpus"),
                        help="folder for corpus.md/json (default: COURSE_REPORT_DIR, or corpus/ in the temporary folder)")
    parser.add_argument("--workers", type=int, default=default_workers())
    args = parser.parse_args(argv)
    keys = [k for k in sorted(CASES) if (rung_of(k).children or not args.cuda)
            and (not args.rung or rung_of(k).name in args.rung) and (not args.topic or k.split("/")[0] in args.topic)]
    print(f"{len(keys)} answers; corpus.md in {args.report} shows the verdicts so far", flush=True)
    sys.stdout = Labelled(sys.stdout)
    results = run_corpus(keys, args.workers, done=lambda r: report(r, args.report))
    print(report(results, args.report))
    return 1 if any(as_expected(k, r) for k, r in results.items()) else 0


if __name__ == "__main__":
    sys.exit(main())

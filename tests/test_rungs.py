"""A rung is a plug-in: a toy third rung declared here runs the topics' exercises, and the trusted judge collects its
answers, with no edit to the topics, the harness or grading."""
import numpy as np
import pytest
import torch

import course
from course.grading.nbgrader.trusted import Answers, answer, judge_cell
from course.harness.exercise import judges
from course.harness.rungs import FUNCTION, RUNGS, Rung
from course.topics.grayscale import RGB2GREY
from course.topics.rows import ROW_SUM


def check_numpy(exercise, fn, case, seed=None):
    """The toy rung's runner: fn gets each input as numpy arrays and returns one, judged as a tensor."""
    what = getattr(fn, "__name__", "your function")
    for c in exercise.inputs(case, seed, NUMPY):
        yours = fn(*(a.numpy() if isinstance(a, torch.Tensor) else a for a in c.args))
        exercise.judge(torch.from_numpy(np.asarray(yours)), c, what, None)
    print(f"{what}: {case} passed")


NUMPY = Rung("numpy", sizes="python", small=True, runner=check_numpy, answer=FUNCTION)


def rgb2grey_np(x):
    return (np.float32(0.2989) * x[0] + np.float32(0.5870) * x[1] + np.float32(0.1140) * x[2]).astype(np.uint8)


def rgb2grey_np_rounded(x):
    return np.rint(np.float32(0.2989) * x[0] + np.float32(0.5870) * x[1] + np.float32(0.1140) * x[2]).astype(np.uint8)


def row_sum_np(x):
    return x.sum(axis=1, dtype=np.float32)


@judges(NUMPY)
def check_rgb2grey_numpy(fn, case="photo", seed=None):
    """Checks a numpy grayscale function on one case."""
    NUMPY.check(RGB2GREY, fn, case, seed)


def test_the_toy_rung_is_not_one_of_the_courses():
    assert "numpy" not in RUNGS and NUMPY.sizes in RGB2GREY.case_names


@pytest.mark.parametrize("case", ["tiny", "ragged", "tall_wide", "photo", "random"])
def test_a_right_numpy_answer_passes_every_case_of_the_python_size_table(case, capsys):
    NUMPY.check(RGB2GREY, rgb2grey_np, case, seed=7 if case == "random" else None)
    assert capsys.readouterr().out == f"rgb2grey_np: {case} passed\n"


def test_the_toy_rung_takes_the_small_inputs_of_the_python_rungs():
    shapes = [c.args[0].shape for c in RGB2GREY.inputs("tall_wide", None, NUMPY)]
    assert shapes == [(3, 40, 1), (3, 1, 40)]


def test_a_rounding_numpy_answer_fails_with_the_topics_hint():
    with pytest.raises(AssertionError, match=r"(?s)pixels are wrong.*\nHint: .*that is rounding"):
        NUMPY.check(RGB2GREY, rgb2grey_np_rounded, "ragged")


def test_another_topic_runs_through_the_toy_rung_too():
    NUMPY.check(ROW_SUM, row_sum_np, "shapes")
    with pytest.raises(AssertionError, match="row sums are wrong"):
        NUMPY.check(ROW_SUM, lambda x: x.sum(axis=1, dtype=np.float32) + 1, "ragged")


class InProcess(Answers):
    """The worker's answers from a namespace of this process (what the notebook's kernel does, without the kernel)."""

    def __init__(self, ns):
        self.ns = ns

    def ask(self, what, arg):
        return answer(self.ns, what, arg)


@pytest.mark.parametrize("fn, verdict", [(rgb2grey_np, None), (rgb2grey_np_rounded, "that is rounding")])
def test_the_trusted_judge_collects_the_toy_rungs_answer_through_its_rung(fn, verdict, monkeypatch, capsys):
    monkeypatch.setattr(course, "check_rgb2grey_numpy", check_rgb2grey_numpy, raising=False)
    cell = '"""A numpy grayscale."""\ncheck_rgb2grey_numpy(mine, "ragged")'
    if verdict is None:
        judge_cell(InProcess({"mine": fn}), cell)
        assert capsys.readouterr().out == "mine: ragged passed\n"
    else:
        with pytest.raises(AssertionError, match=verdict):
            judge_cell(InProcess({"mine": fn}), cell)


def test_every_rung_declares_the_words_its_hints_speak():
    from course.harness.rungs import RUNGS, WORDS_KEYS
    for rung in RUNGS.values():
        assert set(rung.words) == set(WORDS_KEYS), rung.name
        assert rung.words["lang"] == rung.name


def test_a_crash_hint_of_its_own_comes_from_the_rung_that_declares_it():
    from course.harness.children import crash_hint
    from course.harness.rungs import CUDA, TRITON
    text = "CompilationError: at 3:8: Cannot access global variable RED"
    assert "`RED = tl.constexpr(...)`" in crash_hint(text, TRITON.words)
    assert crash_hint(text, CUDA.words) == f"read the error above: it comes from {CUDA.words['code']}"
    assert "make BM, BN or BK smaller" in crash_hint("OutOfResources: out of resource: shared memory", TRITON.words)
    assert "outside a tensor" in crash_hint("an illegal memory access was encountered", TRITON.words)  # the shared ones

"""The guard left out (drills/03): a Python rung without `if i < n` must raise IndexError where a block has idle threads, and be right where it has none."""
import re

import torch

from ..harness.exercise import Case, Exercise, judges
from ..harness.python import check_python
from ..harness.rungs import PYTHON
from .grayscale import judge_grey, random_image

__all__ = ("check_guard_left_out",)

THREADS = 256  # the launcher's block size, as in grayscale/L2


def guard_cases(case, seed, rung):
    """The images of a case: every block full ("whole_blocks"), or idle threads in the last block ("ragged")."""
    sizes = {"whole_blocks": [(16, 32), (1, 256)],  # 512 and 256 pixels: no thread without a pixel
             "ragged": [(7, 37), (33, 31), (1, 1)]}[case]  # 259, 1023 and 1 pixels: idle threads in the last block
    return [Case(f"a {h}x{w} image ({h * w:,} pixels, {-(-h * w // THREADS)} blocks of {THREADS})",
                 (random_image(h, w, seed=h * 10007 + w),)) for h, w in sizes]


def _idle(case):
    """How many threads of the last block have no pixel of the case's image."""
    n = case.args[0][0].numel()
    return -(-n // THREADS) * THREADS - n


def _thread(message):
    """The (block, thread) an IndexError from blk_kernel names, or None."""
    m = re.search(r"raised in block (\d+), thread (\d+)", message)
    return (int(m.group(1)), int(m.group(2))) if m else None


def judge_unguarded(yours, case, what, unwritten=None):
    """Asserts a launcher that returned had no thread to run past the end, and gave the right pixels."""
    if _idle(case):
        raise AssertionError(
            f"{what} raised no IndexError for {case.where}, although the last block has {_idle(case)} threads "
            "without a pixel.\nHint: this drill's kernel has no guard: leave out `if i < n:` (and any other test of "
            "i), so that those threads index past the end and blk_kernel raises, as CUDA would not.")
    judge_grey(yours, case, what, unwritten)


def raised_past_the_end(error, case, what):
    """Accepts an IndexError from a thread past the last pixel where the last block has idle threads; raises the verdict otherwise."""
    cause = error.__cause__
    if not isinstance(cause, IndexError):
        raise error
    n = case.args[0][0].numel()
    where = _thread(str(cause))
    i = where[0] * THREADS + where[1] if where else None
    if _idle(case) and (i is None or i >= n):
        return  # the thread past the last pixel indexed past the end: what the drill is about
    raise AssertionError(
        f"{what} raised IndexError for {case.where} in thread i = {i}, which has a pixel (n = {n:,}): "
        f"{str(cause).splitlines()[0]}\nHint: without the guard only the threads past the end (i >= n) "
        "may fail; this one indexes past a tensor although its pixel exists: check the index, "
        "i = blockidx*blockdim + threadidx, and the offsets x[i], x[i+n], x[i+2*n].") from None


GUARD_LEFT_OUT = Exercise(
    name="rgb2grey_noguard", topic=__name__, cases=guard_cases, judge=judge_unguarded, out_dtype=torch.uint8,
    case_names={"python": ("whole_blocks", "ragged")}, out_numel=lambda case: case.args[0][0].numel(),
    raised=raised_past_the_end, passed={"ragged": " (IndexError past the end, as it must)"})


@judges(PYTHON)
def check_guard_left_out(fn, case="ragged"):
    """Checks a grayscale launcher whose kernel has no guard: right where every block is full ("whole_blocks"), IndexError past the end ("ragged")."""
    check_python(GUARD_LEFT_OUT, fn, case)

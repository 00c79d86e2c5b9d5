"""The guard left out (drills/03): a Python rung without `if i < n` must raise IndexError where a block has idle threads, and be right where it has none."""
import re

from ..harness.exercise import Case, judges, require_case, unwritten
from ..harness.python import call_quietly
from .grayscale import judge_grey, random_image

__all__ = ("check_guard_left_out",)

THREADS = 256  # the launcher's block size, as in grayscale/L2


def guard_cases(case):
    """(the images of a case, whether every block is full there)."""
    sizes = {"whole_blocks": [(16, 32), (1, 256)],  # 512 and 256 pixels: no thread without a pixel
             "ragged": [(7, 37), (33, 31), (1, 1)]}[case]  # 259, 1023 and 1 pixels: idle threads in the last block
    return [Case(f"a {h}x{w} image ({h * w:,} pixels, {-(-h * w // THREADS)} blocks of {THREADS})",
                 (random_image(h, w, seed=h * 10007 + w),)) for h, w in sizes]


def _thread(message):
    """The (block, thread) an IndexError from blk_kernel names, or None."""
    m = re.search(r"raised in block (\d+), thread (\d+)", message)
    return (int(m.group(1)), int(m.group(2))) if m else None


@judges("python")
def check_guard_left_out(fn, case="ragged"):
    """Checks a grayscale launcher whose kernel has no guard: right where every block is full ("whole_blocks"), IndexError past the end ("ragged")."""
    require_case(case, ("whole_blocks", "ragged"))
    what = getattr(fn, "__name__", "your function")
    for c in guard_cases(case):
        n = c.args[0][0].numel()
        try:
            yours = call_quietly(fn, c.args, what, c.where)
        except AssertionError as e:
            cause = e.__cause__
            if not isinstance(cause, IndexError):
                raise
            where = _thread(str(cause))
            i = where[0] * THREADS + where[1] if where else None
            if case == "ragged" and (i is None or i >= n):
                continue  # the thread past the last pixel indexed past the end: what the drill is about
            raise AssertionError(
                f"{what} raised IndexError for {c.where} in thread i = {i}, which has a pixel (n = {n:,}): "
                f"{str(cause).splitlines()[0]}\nHint: without the guard only the threads past the end (i >= n) "
                "may fail; this one indexes past a tensor although its pixel exists: check the index, "
                "i = blockidx*blockdim + threadidx, and the offsets x[i], x[i+n], x[i+2*n].") from None
        if case == "ragged":
            raise AssertionError(
                f"{what} raised no IndexError for {c.where}, although the last block has "
                f"{-(-n // THREADS) * THREADS - n} threads without a pixel.\nHint: this drill's kernel has no "
                "guard: leave out `if i < n:` (and any other test of i), so that those threads index past the "
                "end and blk_kernel raises, as CUDA would not.")
        judge_grey(yours, c, what, unwritten(yours))
    print(f"{what}: {case} passed" + (" (IndexError past the end, as it must)" if case == "ragged" else ""))

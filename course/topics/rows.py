"""Per-row sum and per-row max of a float32 matrix (drills/02): the inputs, how an answer is judged, and the checks.

A sum is judged like matmul's dot products: float32 sums in any order are within (w+2)*2**-24*sum|x| of the
exact one (w values in a row). A max is a choice, not arithmetic: it must be exactly the largest value.
"""
import torch

from ..harness.cuda import Binding, check_cuda
from ..harness.exercise import Case, Exercise, expect_tensor, judges, wrong_elements
from ..harness.python import check_python
from ..harness.rungs import CUDA, PYTHON

__all__ = ("check_row_sum", "check_row_max", "check_row_sum_cuda", "check_row_max_cuda")

U32 = 2.0 ** -24  # float32's unit roundoff
SUM_CPP_SRC = "torch::Tensor row_sum(torch::Tensor x);"
MAX_CPP_SRC = "torch::Tensor row_max(torch::Tensor x);"


def _matrix(h, w, seed, sign=0):
    """An (h, w) float32 matrix of seeded values: any sign (sign 0), or all negative (sign -1)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(h, w, generator=g)
    return -(x.abs() + 1.25) if sign < 0 else x  # below -1: an int max (-1) and a max from 0 differ


# (h, w): h rows of w values. Python loops are slow, so their cases stay small; 256 is a block.
SHAPES = {
    "python": {"ragged": [(3, 5), (7, 37), (1, 1)], "negative": [(4, 9), (5, 1)], "long_rows": [(3, 300)],
               "no_rows": [(0, 5)]},
    "cuda": {"ragged": [(37, 53), (1, 257), (100, 1), (1000, 3)], "negative": [(33, 31), (1, 7)],
             "long_rows": [(5, 3000), (2, 100000)], "no_rows": [(0, 7), (0, 1), (2, 3)]},  # and a small one: a stub that launches nothing earns nothing
}
GROUPS = {"shapes": ("ragged", "long_rows", "no_rows")}  # the Python rungs' tests take these together


def row_cases(case, seed, rung):
    """The named inputs of a row check for a rung: Cases of one (h, w) float32 matrix each."""
    if case in GROUPS:
        return [c for part in GROUPS[case] for c in row_cases(part, seed, rung)]
    if case == "random":
        g = torch.Generator().manual_seed(seed)
        hi, wi = (24, 40) if rung.small else (700, 900)
        shapes = [(int(torch.randint(1, hi + 1, (1,), generator=g)), int(torch.randint(1, wi + 1, (1,), generator=g)))
                  for _ in range(3)]
        return [Case(f"a {h}x{w} matrix", (_matrix(h, w, seed=h * 7919 + w + seed, sign=k % 2 * -1),))
                for k, (h, w) in enumerate(shapes)]
    sign = -1 if case == "negative" else 0
    words = " of negative values" if sign else ""
    return [Case(f"a {h}x{w} matrix{words}", (_matrix(h, w, seed=h * 7919 + w, sign=sign),))
            for h, w in SHAPES[rung.sizes][case]]


def _advice(op):
    return {"return": ", e.g. `return out`",
            "shape": f"one {op} per row: the output is a vector of h = x.shape[0] values (torch.empty(h)).",
            "dtype": "the input is float32: make the output float32 too (torch.empty(h) or x.options())."}


def _first_wrong(bad, yours, want, x, op, what, where, extra=""):
    h, w = x.shape
    i = int(bad.nonzero()[0])
    return (f"{what}: {int(bad.sum()):,} of {h:,} row {op} are wrong for {where}.\n"
            f"  first at row {i}: yours {float(yours[i]):.7g}, expected {float(want[i]):.7g}{extra}")


def _unwritten_hint(bad, never, h):
    rows = never.nonzero().flatten()
    if bool(never[int(rows[0]):].all()) and int(rows[0]) > 0:
        return (f"rows {int(rows[0])} to {h - 1} were never written (they still hold NaN): too few threads. One "
                "thread per row needs h threads: blocks = cdiv(h, threads), and i = blockidx*blockdim + threadidx.")
    if int(never.sum()) == h:
        return ("no row was written (every value still holds NaN, what the memory held before): store each row's "
                "result into the output, out[i] = ...")
    listed = ", ".join(str(int(r)) for r in rows[:6]) + (", ..." if len(rows) > 6 else "")
    return (f"{int(never.sum()):,} rows were never written (they still hold NaN: rows {listed}): give every row "
            "0..h-1 a thread of its own.")


def judge_row_sum(yours, case, what, unwritten=None):
    """Asserts yours is the per-row sum of the case's matrix, each within the float32 bound (w+2)*2**-24*sum|x|."""
    x, where = case.args[0], case.where
    h, w = x.shape
    expect_tensor(yours, what, where, (h,), torch.float32, _advice("sum"))
    yours = yours.cpu()
    exact = x.double().sum(1)
    tol = (w + 2) * U32 * x.double().abs().sum(1) + 1e-30
    bad = ~((yours.double() - exact).abs() <= tol)  # NaN counts as wrong
    if not bad.any():
        return
    msg = _first_wrong(bad, yours, exact, x, "sums", what, where,
                       f" (allowed: {float(tol[int(bad.nonzero()[0])]):.3g}, the float32 bound (w+2)*2**-24*sum|x| "
                       f"for w = {w})")
    never = bad & unwritten.cpu() if unwritten is not None else torch.zeros_like(bad)
    y, x64 = yours.double(), x.double()

    def fits(want):
        return bool(((y - want).abs() <= tol)[bad].all())
    if bool(never.any()):
        hint = _unwritten_hint(bad, never, h)
    elif w > 1 and fits(x64[:, :-1].sum(1)):
        hint = "every row misses its last value: the loop over j stops one short. Loop j from 0 while j < w."
    elif w > 1 and fits(x64[:, 1:].sum(1)):
        hint = "every row misses its first value: the loop over j starts at 1. Start it at 0 (and s at 0)."
    elif fits(x64[:, -1]):
        hint = "each row's result is its last value alone: each step replaces the sum instead of adding to it (+=)."
    elif fits(x64.amax(1)):
        hint = "your values are each row's max, not its sum."
    elif fits(x64.sum(1) / w):
        hint = "your values are each row's mean: the sum divided by w. Do not divide."
    elif h > 1 and w > 1 and fits(x64.reshape(-1)[:h * w].view(w, h).t().sum(1)):
        hint = ("you read the matrix column by column (x[j*h + i]); it is stored row by row: value (i, j) is "
                "x[i*w + j].")
    elif bool((y == y.round()).all()):
        hint = "every value is a whole number: the sum is kept in an int. Declare it float."
    else:
        hint = ("the values are wrong in a way the checker cannot name. Row i's sum is x[i*w] + x[i*w + 1] + ... + "
                "x[i*w + w - 1]: print the row, your sum and torch's x[i].sum() for the first wrong row.")
    raise wrong_elements(f"{msg}\nHint: {hint}", bad)


def judge_row_max(yours, case, what, unwritten=None):
    """Asserts yours is exactly the per-row max of the case's matrix."""
    x, where = case.args[0], case.where
    h, w = x.shape
    expect_tensor(yours, what, where, (h,), torch.float32, _advice("max"))
    yours = yours.cpu()
    want = x.amax(1) if h else torch.empty(0)
    bad = ~(yours == want)
    if not bad.any():
        return
    msg = _first_wrong(bad, yours, want, x, "maxima", what, where)
    never = bad & unwritten.cpu() if unwritten is not None else torch.zeros_like(bad)

    def fits(alt):
        return bool((yours == alt)[bad].all())
    negative_rows = want < 0
    if bool(never.any()):
        hint = _unwritten_hint(bad, never, h)
    elif fits(want.trunc()) and bool(negative_rows[bad].all()) and fits(torch.zeros_like(want)):
        hint = ("your max is 0 on these rows, where every value is negative, which fits two mistakes: either it starts "
                "at 0, which is larger than all of them (start from the row's first value, x[i*w], or -INFINITY), or "
                "it is kept in an int, which truncates -0.3 to 0 (declare it float).")
    elif bool(negative_rows[bad].all()) and fits(torch.zeros_like(want)):
        hint = ("your max is 0 on rows where every value is negative: it starts at 0, which is larger than all of "
                "them. Start from the row's first value, x[i*w], or from -INFINITY (float('-inf') in Python).")
    elif fits(want.trunc()):
        hint = "your values are each row's max truncated to a whole number: the max is kept in an int. Declare it float."
    elif w > 1 and fits(x[:, :-1].amax(1)):
        hint = "every row misses its last value: the loop over j stops one short. Loop j while j < w."
    elif fits(x.abs().amax(1)):
        hint = "your values are the largest absolute values (fabsf): the max compares the values themselves."
    elif fits(x.amin(1)):
        hint = "your values are each row's min: the comparison is the wrong way round."
    elif fits(x.double().sum(1).float()) or bool(((yours.double() - x.double().sum(1)).abs() < 1e-3)[bad].all()):
        hint = "your values are each row's sum, not its max."
    elif h > 1 and w > 1 and fits(x.reshape(-1).view(w, h).t().amax(1)):
        hint = ("you read the matrix column by column (x[j*h + i]); it is stored row by row: value (i, j) is "
                "x[i*w + j].")
    elif bool((yours[bad] == yours[bad].round()).all()) and bool((want[bad] != want[bad].round()).all()):
        hint = "every wrong value is a whole number: the max is kept in an int. Declare it float."
    elif bool(negative_rows[bad].all()) and bool((~negative_rows & ~bad).any()):
        hint = ("only rows where every value is negative are wrong, and every other row is right: does your max "
                "start at 0, or at a value that is not in the row? Start from the row's first value, x[i*w].")
    else:
        hint = ("the values are wrong in a way the checker cannot name. Row i's max is the largest of x[i*w] to "
                "x[i*w + w - 1]: print the row, your max and torch's x[i].max() for the first wrong row.")
    raise wrong_elements(f"{msg}\nHint: {hint}", bad)


CASE_NAMES = {"python": ("shapes", "ragged", "negative", "long_rows", "no_rows", "random"),
              "cuda": ("ragged", "negative", "long_rows", "no_rows", "random"), "modes": ("memory", "integrity")}
# No memory-check edges (Exercise.edges, issue 38): one thread per row runs furthest past the matrix at one row, and
# ragged already holds one row (1x257: 255 of 256 threads outside) and one column (100x1); no_rows (0 blocks) is its
# own test, where a launch without `if (h > 0)` fails already.
MEMORY_HINT = ("a thread past the last row must do nothing: guard with `if (i < h)`, and read only row i's values, "
               "x[i*w] to x[i*w + w - 1].")
ROW_SUM = Exercise(name="row_sum", topic=__name__, cases=row_cases, judge=judge_row_sum, out_dtype=torch.float32,
                   case_names=CASE_NAMES, out_numel=lambda case: case.args[0].shape[0],
                   bindings={"cuda": Binding("row_sum", SUM_CPP_SRC)},
                   hints={"memory": MEMORY_HINT, "computes": "every row's sum"},
                   one_thread={"element": ("row's sum", "rows' sums")})  # one thread per row
ROW_MAX = Exercise(name="row_max", topic=__name__, cases=row_cases, judge=judge_row_max, out_dtype=torch.float32,
                   case_names=CASE_NAMES, out_numel=lambda case: case.args[0].shape[0],
                   bindings={"cuda": Binding("row_max", MAX_CPP_SRC)},
                   hints={"memory": MEMORY_HINT, "computes": "every row's max"},
                   one_thread={"element": ("row's max", "rows' maxima")})  # one thread per row


@judges(PYTHON)
def check_row_sum(fn, case="shapes", seed=None):
    """Checks a Python-rung per-row sum (a function of one (h, w) float32 matrix) on one case."""
    check_python(ROW_SUM, fn, case, seed)


@judges(PYTHON)
def check_row_max(fn, case="shapes", seed=None):
    """Checks a Python-rung per-row max (a function of one (h, w) float32 matrix) on one case."""
    check_python(ROW_MAX, fn, case, seed)


@judges(CUDA)
def check_row_sum_cuda(answer, case="ragged", seed=None):
    """Checks a compiled row_sum (your source, or the module load_cuda built) on one case, "memory" or "integrity"."""
    check_cuda(ROW_SUM, answer, case, seed)


@judges(CUDA)
def check_row_max_cuda(answer, case="ragged", seed=None):
    """Checks a compiled row_max (your source, or the module load_cuda built) on one case, "memory" or "integrity"."""
    check_cuda(ROW_MAX, answer, case, seed)

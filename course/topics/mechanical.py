"""Is it really mechanical? (drills/09): the places where the same text means something else in CUDA C, one check each.

C's int has 32 bits where Python's grows (c_int); C's / and % truncate where Python's // and % floor (c_div,
c_mod); a literal without its f is a double in C where PyTorch computes a byte times a Python float in float32
(grey_double); `counts[v] += 1` from many threads at once loses counts on a GPU where blk_kernel runs one thread
at a time (histogram, atomicAdd); `0 < i < n - 1` is a guard in Python and `(0 < i) < n - 1` in C (smooth).
"""
import re

import torch

from ..harness.cuda import Binding, check_cuda
from ..harness.exercise import Case, Exercise, expect_tensor, first, judges, require_case, wrong_elements
from ..harness.python import call_quietly
from ..harness.rungs import CUDA, PYTHON
from ..images import photo
from .grayscale import rgb2grey
from .rounding import rounding_edges

__all__ = ("check_c_int", "check_c_div", "check_c_mod", "check_grey_double", "check_histogram_cuda",
           "check_smooth_cuda", "grey_double_reference")

INT_MIN, INT_MAX = -2**31, 2**31 - 1
HIST_CPP_SRC = "torch::Tensor histogram(torch::Tensor x);"
SMOOTH_CPP_SRC = "torch::Tensor smooth(torch::Tensor x);"


# ---- C's int ----------------------------------------------------------------------------------------------------

def c_int_reference(v):
    """What a 32-bit C int holds for the exact integer v: two's complement, wrapped by 2**32."""
    return (v + 2**31) % 2**32 - 2**31


# (what the value is, the value): plain values at the edges, then the flat index of a pixel of a large image
INT_CASES = {
    "values": [("0", 0), ("-1", -1), ("INT_MAX", INT_MAX), ("INT_MAX + 1", INT_MAX + 1), ("INT_MIN", INT_MIN),
               ("INT_MIN - 1", INT_MIN - 1), ("2**32", 2**32), ("2**32 + 5", 2**32 + 5), ("-2**32 - 7", -2**32 - 7),
               ("3 * 2**31 + 12", 3 * 2**31 + 12), ("10**12", 10**12)],
    "indices": [(f"row*w + col of the last pixel of a {h}x{w} image", (h - 1) * w + (w - 1))
                for h, w in ((1080, 1920), (46340, 46340), (46341, 46341), (50000, 50000), (65536, 65536),
                             (100000, 100000))]
    + [("i + 2*n, the blue value of the last pixel of a 1x715827883 image", 3 * 715827883 - 1)],
}


@judges(PYTHON)
def check_c_int(fn, case="values"):
    """Checks c_int(v): the value a 32-bit C int holds for the exact integer v, on edge values or on large images' indices."""
    require_case(case, tuple(INT_CASES))
    what = getattr(fn, "__name__", "your function")
    for words, v in INT_CASES[case]:
        yours, right = call_quietly(fn, (v,), what, words), c_int_reference(v)
        if isinstance(yours, bool) or not isinstance(yours, int):
            raise AssertionError(f"{what}({v}) returned {type(yours).__name__} {yours!r}, not an int.\nHint: return "
                                 "a Python int, e.g. with int(...).")
        if yours != right:
            lost = "" if case == "values" else (
                f" A thread indexing with it would reach {abs(right - v):,} elements "
                f"{'before' if right < 0 else 'short of'} the one it means.")
            raise AssertionError(
                f"{what}({v:,}) ({words}) returned {yours:,}; a C int holds {right:,}.{lost}\nHint: a C int has 32 "
                f"bits: it holds {INT_MIN:,} to {INT_MAX:,}, and arithmetic past either end wraps around by 2**32 "
                f"({2**32:,}), where Python's int just grows.")
    print(f"{what}: {case} passed")


# ---- C's / and % ------------------------------------------------------------------------------------------------

def c_div_reference(a, b):
    """C's a / b on ints: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_mod_reference(a, b):
    """C's a % b on ints: what a / b leaves, with the sign of a."""
    return a - b * c_div_reference(a, b)


PAIRS = ((7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, 5), (-1, 256), (-300, 256), (255, 16),
         (-17, 16), (5, 7), (-5, 7))


def _check_division(fn, ref, op, c_op, why):
    what = getattr(fn, "__name__", "your function")
    for a, b in PAIRS:
        yours = call_quietly(fn, (a, b), what, f"a={a}, b={b}")
        right = ref(a, b)
        if isinstance(yours, bool) or not isinstance(yours, int):
            raise AssertionError(f"{what}({a}, {b}) returned {type(yours).__name__} {yours!r}, not an int.\nHint: "
                                 "return a Python int.")
        if yours != right:
            same = " (Python's answer)" if yours == eval(f"{a} {op} {b}") else ""
            raise AssertionError(f"{what}({a}, {b}) returned {yours}{same}; C's {a} {c_op} {b} is {right}.\n"
                                 f"Hint: {why}")
    print(f"{what}: passed")


@judges(PYTHON)
def check_c_div(fn):
    """Checks c_div(a, b): what C's a / b gives on ints, negative ones included."""
    _check_division(fn, c_div_reference, "//", "/", "C's / truncates toward zero (-7 / 2 is -3), Python's // floors, "
                    "rounding toward minus infinity (-7 // 2 is -4). They agree when a and b have the same sign.")


@judges(PYTHON)
def check_c_mod(fn):
    """Checks c_mod(a, b): what C's a % b gives on ints, negative ones included."""
    _check_division(fn, c_mod_reference, "%", "%", "C keeps a == (a / b) * b + a % b with its truncating /, so its "
                    "remainder takes the sign of a (-7 % 2 is -1); Python's takes the sign of b (-7 % 2 is 1).")


# ---- a double literal --------------------------------------------------------------------------------------------

def grey_double_reference(x):
    """What the C text 0.2989*r + 0.5870*g + 0.1140*b (no f) gives for a (3, H, W) uint8 image: double arithmetic, truncated."""
    r, g, b = x.double()
    return (0.2989 * r + 0.5870 * g + 0.1140 * b).to(torch.uint8)


def _double_images(case):
    if case == "edges":
        return [("the 317 rounding-edge colours (a 1x317 image)", rounding_edges())]
    img = photo()
    return [(f"the photo ({img.shape[1]}x{img.shape[2]})", img)]


@judges(PYTHON)
def check_grey_double(fn, case="edges"):
    """Checks grey_double(x): the bytes C computes from the lessons' sum written without f, on the edge colours or the photo."""
    require_case(case, ("edges", "photo"))
    what = getattr(fn, "__name__", "your function")
    for where, x in _double_images(case):
        yours = call_quietly(fn, (x.clone(),), what, where)
        h, w = x.shape[1:]
        expect_tensor(yours, what, where, (h, w), torch.uint8, {
            "shape": "return an (H, W) image, like rgb2grey.", "dtype": "return uint8 bytes: .to(torch.uint8)."})
        right = grey_double_reference(x)
        bad = yours.cpu() != right
        if bad.any():
            idx, at = first(bad)
            r, g, b = (int(c) for c in x[(slice(None), *idx)])
            float32 = bool(torch.equal(yours.cpu(), rgb2grey(x)))
            hint = ("your bytes are the float32 reference's: PyTorch computes a uint8 tensor times a Python float in "
                    "float32, but in C 0.2989 is a double, and so is every product and sum it enters. Compute in "
                    "float64 (x.double()) in the same order." if float32 else
                    "compute as C does: each value as a double, (0.2989*r + 0.5870*g) + 0.1140*b, truncated to a byte.")
            raise wrong_elements(f"{what}: {int(bad.sum()):,} of {h * w:,} pixels differ from C's double arithmetic "
                                 f"for {where}; the first at {at}: yours {int(yours[tuple(idx)])}, C's "
                                 f"{int(right[tuple(idx)])} (r={r}, g={g}, b={b}).\nHint: {hint}", bad)
    print(f"{what}: {case} passed")


# ---- += into a shared count: a race, and atomicAdd ---------------------------------------------------------------

def histogram_cases(case, seed, rung):
    """The values of a case: 1-D uint8 tensors."""
    g = torch.Generator().manual_seed(9)
    if case == "small":
        return [Case(f"{n:,} random values", (torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g),))
                for n in (1, 259, 1000)]
    if case == "photo":
        red = photo()[0].flatten().contiguous()
        return [Case(f"the photo's {red.numel():,} red values", (red,))]
    return [Case("1,048,576 copies of the value 42", (torch.full((2**20,), 42, dtype=torch.uint8),))]


def judge_histogram(yours, case, what, unwritten=None):
    """Asserts yours holds each of the 256 values' counts."""
    x = case.args[0]
    expect_tensor(yours, what, case.where, (256,), torch.int32, {
        "shape": "one count per byte value: torch::zeros({256}, ...).",
        "dtype": "int32 counts: input.options().dtype(torch::kInt)."})
    right = torch.bincount(x.cpu().long(), minlength=256).int()
    yours = yours.cpu()
    bad = yours != right
    if bad.any():
        idx, _ = first(bad, ("value",))
        total = int(yours.long().sum())
        lost = x.numel() - total
        hint = (f"{lost:,} of {x.numel():,} counts were lost: `counts[v] += 1` reads the count, adds one and writes it "
                "back; two threads that do it at once both read the old count, and one increment is lost. "
                "atomicAdd(&counts[v], 1) makes the three one indivisible step."
                if 0 < lost <= x.numel() and (yours <= right).all() else
                "each thread adds one to the count of its value, counts[x[i]], and to nothing else; start every count "
                "at 0 (torch::zeros).")
        raise wrong_elements(f"{what}: {int(bad.sum())} of 256 counts are wrong for {case.where}; the first, of the "
                             f"value {idx[0]}: yours {int(yours[idx[0]])}, expected {int(right[idx[0]])} (yours add up "
                             f"to {total:,} of {x.numel():,}).\nHint: {hint}", bad)


HISTOGRAM = Exercise(
    name="histogram", topic=__name__, cases=histogram_cases, judge=judge_histogram, out_dtype=torch.int32,
    case_names={"cuda": ("small", "photo", "one_value"), "modes": ("memory", "integrity")}, probe="small",
    out_numel=lambda case: 256, bindings={"cuda": Binding("histogram", HIST_CPP_SRC)}, work="shared",
    hints={"memory": "a thread past the last value must do nothing: guard with `if (i < n)`.",
           "computes": "every count"})

_ATOMIC = re.compile(r"\batomic\w*\s*\(")


@judges(CUDA)
def check_histogram_cuda(answer, case="small", seed=None):
    """Checks a compiled histogram (256 int32 counts of a uint8 tensor) on one case: an input case, "memory" or "integrity"."""
    from ..device import cpu_mode
    from ..toolchain.load import sources_of
    source = answer if isinstance(answer, str) else (sources_of(answer) or [""])[0]
    kernels = source.split("torch::Tensor histogram")[0]
    if cpu_mode() and case != "integrity" and not _ATOMIC.search(kernels):
        # CPU mode runs a block's threads one at a time: no count is lost there, so the source must say it
        raise AssertionError(
            "histogram: your kernel adds into the counts without an atomic operation. CPU mode runs a block's threads "
            "one at a time, so every count is right here; on a GPU, threads adding into the same count at once lose "
            "increments (a race).\nHint: atomicAdd(&counts[v], 1) makes the read, the add and the write one "
            "indivisible step.")
    check_cuda(HISTOGRAM, answer, case, seed)


# ---- a chained comparison: a guard in Python, something else in C ------------------------------------------------

def smooth_reference(x):
    """The 3-point mean of a 1-D float32 tensor, the first and last values copied: in float32, in the kernel's order."""
    out = x.clone()
    if x.numel() > 2:
        out[1:-1] = (x[:-2] + x[1:-1] + x[2:]) / 3
    return out


def smooth_cases(case, seed, rung):
    """The inputs of a case: 1-D float32 tensors of seeded random values."""
    sizes = {"small": (1, 2, 3, 5), "ragged": (257, 1000, 4097)}[case]
    g = torch.Generator().manual_seed(19)
    return [Case(f"{n:,} values", (torch.rand(n, generator=g) * 100,)) for n in sizes]


def judge_smooth(yours, case, what, unwritten=None):
    """Asserts yours is the 3-point mean with the ends copied."""
    x = case.args[0]
    n = x.numel()
    expect_tensor(yours, what, case.where, (n,), torch.float32, {
        "shape": "one output per input value: torch::empty_like(input).",
        "dtype": "float32, the input's: input.options()."})
    right = smooth_reference(x.cpu())
    yours = yours.cpu()
    bad = ~torch.isclose(yours, right, rtol=1e-6, atol=1e-6)
    if unwritten is not None:
        bad |= unwritten.cpu()
    if bad.any():
        idx, _ = first(bad, ("element",))
        i = idx[0]
        ends = bad[0] or bad[-1]
        hint = ("the first and the last value have no neighbour on one side: they are copied. If your guard reads "
                "`0 < i < n - 1`, C reads it as `(0 < i) < n - 1`: 0 or 1 compared with n - 1, true for every "
                "thread but thread 0 once n > 2, the threads past the end included: thread 0 reads x[-1], thread n - 1 "
                "reads x[n], and the idle threads write past the output. Write `0 < i && i < n - 1`."
                if ends else "out[i] = (x[i-1] + x[i] + x[i+1]) / 3 where 0 < i < n - 1, in that order, in float.")
        never = unwritten is not None and bool(unwritten.reshape(-1)[i])
        raise wrong_elements(f"{what}: {int(bad.sum())} of {n:,} values are wrong for {case.where}; the first at "
                             f"element {i}: yours {'never written' if never else f'{float(yours[i]):.6g}'}, expected "
                             f"{float(right[i]):.6g}.\nHint: {hint}", bad)


SMOOTH = Exercise(
    name="smooth", topic=__name__, cases=smooth_cases, judge=judge_smooth, out_dtype=torch.float32,
    case_names={"cuda": ("small", "ragged"), "modes": ("memory", "integrity")}, probe="ragged",
    out_numel=lambda case: case.args[0].numel(), bindings={"cuda": Binding("smooth", SMOOTH_CPP_SRC)},
    hints={"memory": "only 0 < i < n - 1 reads x[i-1] and x[i+1]: in C that guard is `0 < i && i < n - 1`, and "
                     "threads past the end (i >= n) must do nothing.",
           "computes": "every value"})


@judges(CUDA)
def check_smooth_cuda(answer, case="small", seed=None):
    """Checks a compiled smooth (the 3-point mean, ends copied) on one case: an input case, "memory" or "integrity"."""
    check_cuda(SMOOTH, answer, case, seed)

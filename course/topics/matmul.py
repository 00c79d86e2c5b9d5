"""Matmul: the inputs each check feeds an answer, how a float32 product is judged against an exact one, and the checks."""
import inspect
import math
from functools import partial
import textwrap

import torch

from ..cuda import cuda_begin
from ..device import cpu_mode
from ..harness.contract import tiled_source
from ..harness.cuda import Binding, check_cuda
from ..harness.evidence import loads_without_other, tf32_dots
from ..harness.exercise import (Case, Exercise, element_of, expect_tensor, first, judges, order_hint, split_hint,
                                with_hint, wrong_elements)
from ..harness.python import check_python
from ..harness.rungs import CUDA, PYTHON, TRITON
from ..harness.speed import Speed
from ..harness.triton import HEADER, Launch, Source, check_triton, source_of

__all__ = ("weights", "check_matmul", "check_matmul_cuda", "check_matmul_tiled", "check_matmul_tiled_cuda",
           "check_matmul_triton")

U32 = 2.0 ** -24  # float32's unit roundoff: half the gap between 1 and the next float32
SAMPLE = 64  # wrong elements a hint's candidate causes are tested on: enough to tell them apart, cheap at 1024^3
CPP_SRC = "torch::Tensor matmul(torch::Tensor m, torch::Tensor n);"
TILED_CPP_SRC = "torch::Tensor matmul_static(torch::Tensor m, torch::Tensor n);"
WEIGHTS_SEED = 1  # the lecture's torch.manual_seed(1) before weights = torch.randn(784, 10)
# The tiled lesson's solution (matmul/05_tiling, exercise 6): the kernel the tiled exercise's speed test times against.
TILED_SRC = cuda_begin + r"""
constexpr int tw = 16;

__global__ void matmul_ks(float* m, float* n, float* out, int h, int w, int k) {
    __shared__ float ms[tw][tw], ns[tw][tw];
    int tc = threadIdx.x, tr = threadIdx.y;
    int r = blockIdx.y*blockDim.y + tr, c = blockIdx.x*blockDim.x + tc;
    float p = 0.0f;
    for (int ph = 0; ph < cdiv(k, tw); ++ph) {
        int idx = ph*tw;
        ms[tr][tc] = r < h && idx + tc < k ? m[r*k + idx + tc] : 0.0f;
        ns[tr][tc] = c < w && idx + tr < k ? n[(idx + tr)*w + c] : 0.0f;
        __syncthreads();
        for (int i = 0; i < tw; ++i) p += ms[tr][i] * ns[i][tc];
        __syncthreads();
    }
    if (r < h && c < w) out[r*w + c] = p;
}

torch::Tensor matmul_static(torch::Tensor m, torch::Tensor n) {
    CHECK_INPUT(m); CHECK_INPUT(n);
    int h = m.size(0), w = n.size(1), k = m.size(1);
    TORCH_CHECK(k == n.size(0), "Size mismatch!");
    auto output = torch::empty({h, w}, m.options());
    dim3 tpb(tw, tw);
    dim3 blocks(cdiv(w, tpb.x), cdiv(h, tpb.y));
    matmul_ks<<<blocks, tpb>>>(m.data_ptr<float>(), n.data_ptr<float>(), output.data_ptr<float>(), h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""
# The Triton lesson's solution (matmul/06_triton, exercise 7): the kernel the Triton matmul's speed test times against.
TRITON_SRC = Source("matmul_triton", HEADER + r"""
BM, BN, BK = 64, 64, 32  # a program's tile of out (BM x BN), and the k step


@triton.jit
def matmul_kernel(m_ptr, n_ptr, out_ptr, h, w, k, stride_mr, stride_mk, stride_nk, stride_nc, stride_or, stride_oc,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_r, pid_c = tl.program_id(1), tl.program_id(0)  # blockIdx.y, blockIdx.x
    rows = pid_r*BM + tl.arange(0, BM)
    cols = pid_c*BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k, BK):
        ks = k0 + tl.arange(0, BK)
        a = tl.load(m_ptr + rows[:, None]*stride_mr + ks[None, :]*stride_mk,
                    mask=(rows[:, None] < h) & (ks[None, :] < k), other=0.0)
        b = tl.load(n_ptr + ks[:, None]*stride_nk + cols[None, :]*stride_nc,
                    mask=(ks[:, None] < k) & (cols[None, :] < w), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(out_ptr + rows[:, None]*stride_or + cols[None, :]*stride_oc, acc,
             mask=(rows[:, None] < h) & (cols[None, :] < w))


def matmul_triton(m, n):
    h, k = m.shape
    k2, w = n.shape
    assert k == k2, "Size mismatch!"
    out = torch.empty(h, w, dtype=m.dtype, device=m.device)
    grid = (triton.cdiv(w, BN), triton.cdiv(h, BM))
    matmul_kernel[grid](m, n, out, h, w, k, m.stride(0), m.stride(1), n.stride(0), n.stride(1),
                        out.stride(0), out.stride(1), BM=BM, BN=BN, BK=BK)
    return out
""")


def weights():
    """The lessons' (784, 10) float32 weights: seeded normal values, the same every time."""
    return torch.randn(784, 10, generator=torch.Generator().manual_seed(WEIGHTS_SEED))


def _random(m, k, n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)


# The hidden sizes, drawn per student from strata, so that every student's sizes reveal the same mistakes: (m, k, n)
# each between lo and hi, never a multiple of 16. Python: one product whose every dimension needs two 16-wide tiles
# and ends ragged (a missing barrier or a dropped partial tile shows), one that fits a single tile. CUDA: two of
# several 32-wide tiles, one inside a single tile. Triton: as CUDA, sides up to 160, where the interpreter (CPU mode)
# takes about 2 s a product with 32x32 tiles.
HIDDEN = {"python": [(17, 24), (1, 16)], "cuda": [(33, 300), (33, 300), (1, 32)],
          "triton": [(33, 160), (33, 160), (1, 32)]}


def _random_shapes(seed, strata):
    g = torch.Generator().manual_seed(seed)
    shapes = []
    for lo, hi in strata:
        dims = [int(v) for v in torch.randint(lo, hi + 1, (3,), generator=g)]
        shapes.append(tuple(v - 1 if v % 16 == 0 and v > lo else v for v in dims))
    return shapes


# (m, k, n): a is m x k, b is k x n. Python loops are slow, so their cases stay small.
SHAPES = {
    "python": {"tiny": [(1, 1, 1)], "ragged": [(3, 5, 7), (17, 37, 19)],
               "tall_skinny": [(37, 2, 1), (1, 2, 37), (1, 60, 1)], "all_different": [(6, 11, 4)]},
    "cuda": {"tiny": [(1, 1, 1)], "ragged": [(37, 53, 29), (17, 1, 31), (100, 67, 83)],
             "tall_skinny": [(1000, 3, 2), (2, 3000, 5), (1, 2048, 1)], "all_different": [(45, 70, 23)],
             "large": [(1024, 1024, 1024)]},
}
SHAPES["triton"] = SHAPES["cuda"]  # the same cases on a GPU and in CPU mode (its interpreter: 0.7 to 1.1 s for each
# tall and skinny product with 32x32x32 tiles), except the large one
# CPU mode's large case: for CUDA 1024^3 takes 7 to 10 s a kernel there, 512^3 about 1; Triton's interpreter runs a
# program per Python call and took 6.8 s for 256^3 with 32x32x32 tiles, 0.9 s for 128^3
CPU_LARGE = {"cuda": [(512, 512, 512)], "triton": [(128, 128, 128)]}


def matmul_cases(case, seed, rung):
    """The named inputs of a matmul check for a rung: Cases of (a, b), float32 and contiguous."""
    if case == "digits":
        from ..digits import digits
        x, _ = digits(5)
        return [Case("the digits: a (5, 784) batch of digits times the (784, 10) weights", (x, weights()))]
    if case == "random":
        shapes = _random_shapes(seed, HIDDEN[rung.sizes])
    elif case == "large" and cpu_mode():
        shapes = CPU_LARGE[rung.sizes]
    else:
        shapes = SHAPES[rung.sizes][case]
    return [Case(f"a ({m}, {k}) @ ({k}, {n}) product", _random(m, k, n, seed=m * 10007 + k * 101 + n + (seed or 0)))
            for m, k, n in shapes]


def bound(a, b):
    """How far a float32 product may be from the exact one, element by element: (k+2) u |a| @ |b| (u = 2**-24).

    Every float32 dot product of length k, summed in any order, with or without fused multiply-adds,
    is within k u |a| @ |b| of the exact value (the classic forward-error bound, Higham 2002, 3.1);
    two more u cover rounding the result. Half-precision inputs or sums, a dropped term, a transposed
    operand are far outside it on these inputs.
    """
    k = a.shape[1]
    return (k + 2) * U32 * (a.double().abs() @ b.double().abs()) + 1e-30


def _close(yours, want, tol):
    return bool(((yours - want).abs() <= tol).all())


def _dots(rows, cols):
    """Row-by-row dot products of two (s, k) float64 tensors."""
    return (rows * cols).sum(dim=1)


def _names(words):
    """The names a hint uses: the student's where the runner read them, else the lesson's (r, c, i, m, n, out)."""
    return {"lang": "cuda", "row": "r", "col": "c", "loop": "i", "a": "m", "b": "n", "out": "out", "flat": True,
            **(words or {})}


def _unwritten_hint(bad, w, tiled):
    """The hint when every wrong element holds the fill value's bits: where they lie names the grid; otherwise the
    causes that leave those bits (no store; in CPU mode or a Python rung, arithmetic on a NaN read too early or
    past a tensor's end keeps them)."""
    r, c, out, python = w["row"], w["col"], w["out"], w["lang"] == "python"
    rows, cols = bad.any(1).nonzero().flatten(), bad.any(0).nonzero().flatten()
    where = ""
    source = "blockidx" if python else "blockIdx"
    axes = ({"y": "axis 1", "x": "axis 0", "row": "pid_r (the tile row) comes from tl.program_id(1)",
             "col": "pid_c (the tile column) comes from tl.program_id(0)"} if w["lang"] == "triton" else
            {"y": "y", "x": "x", "row": f"{r} comes from {source}.y", "col": f"{c} comes from {source}.x"})
    if bool(bad[rows.min():, :].all()) and rows.min() > 0:
        where = (f" (every row from {int(rows.min())} on: the grid covers only {int(rows.min())} rows: its "
                 f"{axes['y']} extent is too small, or the kernel takes its row from {axes['x']}: {axes['row']})")
    elif bool(bad[:, cols.min():].all()) and cols.min() > 0:
        where = (f" (every column from {int(cols.min())} on: the grid covers only {int(cols.min())} columns: its "
                 f"{axes['x']} extent is too small, or the kernel takes its column from {axes['y']}: {axes['col']})")
    if w["lang"] == "triton":
        cover = ("launch a program for every tile of the output, grid = (triton.cdiv(w, BN), triton.cdiv(h, BM)) "
                 "with axis 0 for columns and axis 1 for rows, and have each store its whole tile with "
                 "mask=(rows[:, None] < h) & (cols[None, :] < w)")
        if where or not cpu_mode():
            return f"those elements were never written{where}: {cover}."
        return ("either no program stored them, or they were computed from a NaN read past a tensor's end: a tile "
                "load without a mask reads past m or n at the edges. Mask each tile load and load 0 outside "
                "(mask=(rows[:, None] < h) & (ks[None, :] < k), other=0.0 for m's tile, and (ks[:, None] < k) & "
                f"(cols[None, :] < w) for n's), then {cover}.")
    if python and not w.get("block"):
        cover = f"store every element, {out}[{r}, {c}] = ..., once for each row and column"
    elif python:
        cover = (f"launch enough blocks to cover every ({r}, {c}), blocks = dim3(cdiv(w, tpb.x), cdiv(h, tpb.y)) "
                 f"with x for columns and y for rows, and have each thread with `{r} < h and {c} < w` write "
                 f"{out}[{r}*w + {c}]")
    else:
        cover = (f"launch enough blocks to cover every ({r}, {c}), dim3 blocks(cdiv(w, 16), cdiv(h, 16)) with x for "
                 f"columns and y for rows, and have each thread with {r} < h && {c} < w write {out}[{r}*w + {c}]")
    if where or not (python or cpu_mode()):
        return f"those elements were never written{where}: {cover}."
    if tiled:
        return ("either no thread stored them, or they were computed from a NaN read past a tensor's end: a tile "
                "load without a bound reads past m or n at the edges. Bound each tile load and load 0 outside "
                "(`ms[tr][tc] = r < h && idx + tc < k ? m[r*k + idx + tc] : 0.0f;`, and n's tile with c < w && "
                f"idx + tr < k), then {cover}.")
    if python:
        return (f"either they were never stored ({cover}), or each was computed from its own memory before it was "
                f"written: `{out}[...] += ...` adds to the NaN that torch.empty left there. Sum into a variable that "
                "starts at 0.0 and store it once.")
    return (f"either they were never written ({cover}), or they were computed from a NaN read past a tensor's end "
            f"(keep every index inside its matrix: {w['a']}[{r}*k + {w['loop']}], {w['b']}[{w['loop']}*w + {c}]).")


def _hint(yours, a, b, bad, never, tol, words=None, tiled=False):
    """The fix that the wrong elements point at, each candidate cause tested on a sample of them; "cannot name" when none fits.

    Every candidate is a computation a typical mistake performs; where several fit (with k = 2, dropping
    the first product and keeping only the last are the same), the hint names them all, in the lesson's words.
    """
    m, k = a.shape
    n = b.shape[1]
    w = _names(words)
    python, r_, c_, i_, out = w["lang"] == "python", w["row"], w["col"], w["loop"], w["out"]
    if never and never == int(bad.sum()):
        return _unwritten_hint(bad, w, tiled)
    idx = bad.nonzero()[:SAMPLE]
    r, c = idx[:, 0], idx[:, 1]
    a64, b64 = a.double(), b.double()
    y = yours.double()[r, c]
    scale = _dots(a64[r].abs(), b64[:, c].t().abs())

    def fits(want, slack=0.0):
        return bool(((y - want).abs() <= (k + 2) * U32 * scale + slack + 1e-30).all())

    def fits_dots(rows, cols):
        """Whether y is the product of other rows and columns, each within the bound its own terms allow."""
        allowed = (k + 2) * U32 * _dots(rows.abs(), cols.abs())
        return bool(((y - _dots(rows, cols)).abs() <= allowed + 1e-30).all())

    row, col = a64[r], b64[:, c].t()  # each sampled element's row of a and column of b
    p = r * n + c  # where the kernel wrote each sampled element, counted row by row
    found = []
    if bool((y == 0).all()) and w["lang"] == "triton" and not bool(bad.all()):
        found.append("your kernel wrote 0 there: either the k loop never ran for them (check its bounds, range(0, k, "
                     "BK)), or a tl.store without a mask wrote the lanes of a tile past the last column, which hold 0, "
                     "onto the first elements of the next row. Store with mask=(rows[:, None] < h) & (cols[None, :] < w)")
    elif bool((y == 0).all()):
        loop = "the k loop" if w["lang"] == "triton" else f"the loop over {i_}"
        found.append(f"your kernel wrote 0 everywhere: {loop} never ran (check its bounds) or the sum is "
                     "not what is stored")
    if tiled or w["lang"] == "triton":
        stops = sorted({end for t in (16, 32, 64, 128) for end in (k - k % t, k - t) if 0 < end < k - 1})
        for stop in [end for end in stops if fits(_dots(row[:, :end], col[:, :end]))][:1]:
            found.append(f"every element misses the products of the last {k - stop} values of k (from {stop} on): the "
                         "loop over k's tiles stops a tile early. It must cover the last, partial tile too: "
                         + ("for k0 in range(0, k, BK), its loads masked with ks < k" if w["lang"] == "triton" else
                            "cdiv(k, tw) phases, each tile load bounded by idx + tc < k and idx + tr < k"))
    if bool((y == y.round()).all()) and not bool((y == 0).all()):
        found.append("every value is a whole number: something rounds the sum or its products (int(...), round, //, "
                     "an integer tensor). Keep them float, and start the sum at 0.0" if python else
                     "every value is a whole number: the sum is kept in an int. Declare it float")
    if k > 1 and fits(_dots(row[:, :-1], col[:, :-1])):
        stop = w.get("stop") or ""
        fixed = stop[:-1].rstrip()[:-1].rstrip() if stop.replace(" ", "").endswith("-1") else None
        found.append(f"every element misses the last product: the loop over {i_} stops one short. " + (
            f"range({fixed}) already ends at {fixed} - 1: loop `for {i_} in range({fixed})`" if python and fixed else
            f"It must take all {k} values, 0 to {k - 1}" if python else f"Sum {i_} from 0 while {i_} < k"))
    if k > 1 and fits(_dots(row[:, 1:], col[:, 1:])):
        found.append(f"every element misses the first product: the loop over {i_} starts at 1. Start it at 0"
                     + (f" (range({w['stop']}) does)" if python and w.get("start") and w.get("stop") else ""))
    if k > 1 and fits(row[:, -1] * col[:, -1]):
        found.append("every element is its last product alone: each step replaces the sum instead of adding to it (+=)")
    if tiled or w["lang"] == "triton":
        starts = sorted({k - (k % t or t) for t in (16, 32, 64, 128) if k > t}, reverse=True)
        for start in [s_ for s_ in starts if fits(_dots(row[:, s_:], col[:, s_:]))][:1]:
            found.append(f"every element is the product of the last tile of k alone (k from {start} on): the sum "
                         "starts again at 0 on every tile. " + (
                             "Create the accumulator once, acc = tl.zeros((BM, BN), dtype=tl.float32) before "
                             "`for k0 in range(0, k, BK)`, and add each tile's product to it inside: "
                             "acc += tl.dot(a, b, input_precision=\"ieee\")" if w["lang"] == "triton" else
                             "Declare the sum once before the loop over the phases (float p = 0.0f;) and add to it "
                             "inside (p += ...)"))
    transposed = m == n and w["lang"] == "triton"  # then the same as the transposed product, named below
    if m * n > 1 and not transposed and fits_dots(a64[p % m], b64[:, p // m].t()):
        found.append(f"your values are right but stored column by column: element ({r_}, {c_}) goes to "
                     f"{out}[{r_}*w + {c_}], not {out}[{c_}*h + {r_}]")
    if m > 1 and k > 1 and fits_dots(a64.reshape(-1).view(k, m)[:, r].t(), col):
        found.append(f"you read {w['a']} column by column ({w['a']}[{i_}*h + {r_}]); it is stored row by row: "
                     f"element ({r_}, {i_}) is {w['a']}[{r_}*k + {i_}]")
    if n > 1 and k > 1 and fits_dots(row, b64.reshape(-1).view(n, k)[c]):
        found.append(f"you read {w['b']} column by column ({w['b']}[{c_}*k + {i_}]); it is stored row by row: "
                     f"element ({i_}, {c_}) is {w['b']}[{i_}*w + {c_}]")
    if m == n and m > 1 and fits_dots(a64[c], b64[:, r].t()):
        source = ("" if python and not w.get("block") else
                  f": {r_} comes from {'blockidx' if python else 'blockIdx'}.y, {c_} from .x")
        found.append("your output is the transposed product, element (r, c) holding (c, r): the store's rows and "
                     "columns are swapped. Store the tile at out_ptr + rows[:, None]*stride_or + "
                     "cols[None, :]*stride_oc, passing out.stride(0) as stride_or and out.stride(1) as stride_oc "
                     "(and rows = pid_r*BM + ..., pid_r from tl.program_id(1))" if w["lang"] == "triton" else
                     f"you computed element ({c_}, {r_}) for ({r_}, {c_}){source or ': swap them'}")
    triton = w["lang"] == "triton"
    keep = ("Keep them float32 (no .half(), .bfloat16())" if python else
            "Keep the tiles float32 (no .to(tl.float16)) and pass tl.dot input_precision=\"ieee\"" if triton else
            "Keep them float: float* pointers, data_ptr<float>(), float products")
    for name, roundings in LOW_PRECISION.items():  # inputs rounded, products summed in float32
        if any(fits(_dots(rounded(a[r]).double(), rounded(b[:, c].t()).double())) for rounded in roundings):
            found.append(TF32_HINT if triton and name == "TF32" else
                         f"your values are what {name} inputs give: the kernel rounds a and b to {name} before "
                         f"multiplying. {keep}")
    for name, (dtype, u) in HALF_SUMS.items():
        acc = torch.zeros(len(y), dtype=dtype)
        for i in range(k):  # the sum kept in a low-precision variable, as `__half o = 0;` would
            acc = (acc.double() + row[:, i] * col[:, i]).to(dtype)
        if fits(acc.double(), 2 * u * acc.double().abs()):
            found.append(f"your sums are what a running sum kept in {name} gives: "
                         + ("keep the sum a float32 or Python float" if python else
                            "keep the accumulator float32, acc = tl.zeros((BM, BN), dtype=tl.float32)" if triton else
                            "declare the accumulator float"))
    if found:
        return found[0] + "." if len(found) == 1 else "either " + "; or ".join(found) + "."
    off = (y - _dots(row, col)).abs() / (scale + 1e-30)
    near = (" Your wrong values are all within 1% of the right ones, so the indexing may be right and the "
            "arithmetic not.") if float(off.max()) < 1e-2 else ""
    flat = (f"; flattened as the kernels see them: {w['a']}[{r_}*k + {i_}], {w['b']}[{i_}*w + {c_}], "
            f"{out}[{r_}*w + {c_}]" if w.get("flat", True) else "")
    return (f"the values are wrong in a way the checker cannot name.{near} Element ({r_}, {c_}) is the sum over "
            f"{i_} of a[{r_}, {i_}]*b[{i_}, {c_}]{flat}. Print the {r_}, {c_} and value of one wrong element to see "
            "where yours differs.")


def _tf32(x, nearest=True):
    """x rounded to TF32 (10 bits of mantissa, as tensor cores read float32 with TF32 on): to nearest, or truncated
    (tensor cores given float32 bits ignore the low 13)."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + (0x1000 if nearest else 0)) & ~0x1FFF).view(torch.float32)


# name -> the ways hardware rounds a float32 input to it
LOW_PRECISION = {"half (float16)": [lambda x: x.half()], "bfloat16": [lambda x: x.bfloat16()],
                 "TF32": [_tf32, partial(_tf32, nearest=False)]}
TF32_HINT = ("your values are what TF32 inputs give: tl.dot multiplies float32 tiles on the tensor cores in TF32 "
             "(10 bits of mantissa) unless told otherwise, its default input_precision=\"tf32\". Pass "
             "input_precision=\"ieee\": acc += tl.dot(a, b, input_precision=\"ieee\") (a product broadcast and summed "
             "over k, tl.sum(a[:, :, None]*b[None, :, :], axis=1), becomes such a tl.dot too in some Triton versions, "
             "the grader's among them: write the tl.dot)")
HALF_SUMS = {"half (float16)": (torch.float16, 2.0 ** -11), "bfloat16": (torch.bfloat16, 2.0 ** -8)}


def judge_matmul(yours, case, what, unwritten=None, tiled=False):
    """Asserts yours is a @ b in float32: each element within the float32 error bound of the exact product.

    tiled: the answer is the tiled exercise's, whose hints also name its tile loads."""
    a, b = case.args
    m, n, where = a.shape[0], b.shape[1], case.where
    expect_tensor(yours, what, where, (m, n), torch.float32, {
        "return": ", e.g. `return c` with c = torch.empty(h, w)",
        "shape": f"a ({m}, k) matrix times a (k, {n}) matrix is ({m}, {n}): h = a.shape[0] rows, w = b.shape[1] columns.",
        "dtype": "the inputs are float32: make the output with the inputs' dtype (torch.float32, m.options())."})
    yours = yours.cpu()
    exact = a.double() @ b.double()
    tol = bound(a, b)
    bad = ~((yours.double() - exact).abs() <= tol)  # NaN counts as wrong
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    idx, at = first(bad)
    mine, want = float(yours[tuple(idx)]), float(exact[tuple(idx)])
    msg = (f"{what}: {n_bad:,} of {m * n:,} elements are wrong for {where}.\n"
           f"  first at {at}: yours {mine:.7g}, expected {want:.7g} (off by {abs(mine - want):.3g}; allowed: "
           f"{float(tol[tuple(idx)]):.3g}, the float32 error bound (k+2)*2**-24*sum|a||b| for k = {a.shape[1]})")
    never = int((bad & unwritten).sum()) if unwritten is not None else 0
    if never:
        msg += f"\n  {never:,} of the wrong elements still hold NaN, the value the memory had before your code ran: "
        python = case.words.get("lang") == "python"
        msg += ("never written, or computed from an element read before it was written (arithmetic keeps a NaN's "
                "bits)." if python else "never written, or computed from a NaN read past a tensor's end (in CPU "
                "mode the memory just past each tensor holds that NaN, and the CPU's arithmetic keeps its bits)."
                if cpu_mode() else "they were never written.")
    raise wrong_elements(f"{msg}\nHint: {_hint(yours, a, b, bad, never, tol, case.words, tiled)}", bad)


CASE_NAMES = {"python": ("tiny", "ragged", "tall_skinny", "all_different", "digits", "random"),
              "cuda": ("tiny", "ragged", "tall_skinny", "all_different", "digits", "large", "random")}
CASE_NAMES["triton"] = CASE_NAMES["cuda"]
EDGES = ("tiny", "tall_skinny")  # the memory check's sizes besides the ragged ones: a 1x1 product, one row, one column
MEMORY_HINT = ("a thread outside the output must not read or write: guard with `if (row < h && col < w)` (h rows "
               "of a, w columns of b), and keep every index inside its matrix: a[row*k + i], b[i*w + col].")
TRITON_MEMORY_HINT = ("no lane of a tile may read or write outside its matrix: mask every tl.load and tl.store, the "
                      "output tile with mask=(rows[:, None] < h) & (cols[None, :] < w), m's tile with (rows[:, None] < "
                      "h) & (ks[None, :] < k) and n's with (ks[:, None] < k) & (cols[None, :] < w), other=0.0 on the "
                      "loads; and step each pointer by its matrix's strides (rows*stride_mr + ks*stride_mk).")
RACE_HINT = ("every thread must have written its part of the tile before any thread reads it, and have finished "
             "reading it before any thread overwrites it with the next tile: __syncthreads() after filling the "
             "shared arrays, and again after the loop that uses them.")

SPEED_SIZE = {False: (2048, 2048, 2048), True: (64, 64, 64)}  # (m, k, n) of the speed test: GPU, CPU mode (tests only)


def speed_where(small):
    """How a speed test's messages name its timed product."""
    return "a ({0}, {1}) @ ({1}, {2}) product".format(*SPEED_SIZE[small])


def speed_product(gen, device, small):
    """The speed test's inputs for one call: a fresh random (m, k) and (k, n) pair, made on the device from gen."""
    m, k, n = SPEED_SIZE[small]
    return torch.randn(m, k, generator=gen, device=device), torch.randn(k, n, generator=gen, device=device)


def product_agrees(yours, args):
    """Whether yours is a @ b by judge_matmul's rule (the float32 error bound), computed where the tensors are."""
    a, b = args
    if tuple(yours.shape) != (a.shape[0], b.shape[1]) or yours.dtype != torch.float32:
        return False
    return bool(((yours.double() - a.double() @ b.double()).abs() <= bound(a, b)).all())


def cublas(m, n):
    """cuBLAS's float32 product, TF32 off: the yardstick the speed test reports beside the course's kernel."""
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch.matmul(m, n)
def _source_verdict(text, mode, cpu):
    """What a passing Triton answer's source shows wrong: a masked tile load with no other= (the memory check), and in
    CPU mode, whose interpreter multiplies in float32 with numpy whatever tl.dot is told, TF32 left on."""
    loose = loads_without_other(text)
    if mode == "memory" and loose:
        return (f"a tile load in the k loop has a mask but no other=: `{loose[0]}`. Where the mask is off, its lanes "
                "hold whatever Triton leaves there (undefined, says its documentation: 0 in the interpreter and often on a "
                "GPU, but nothing promises it), and tl.dot adds them into the sums of the last, partial tile.\n"
                "Hint: give every masked tile load other=0.0, so the lanes past the matrix add nothing.")
    tf32 = tf32_dots(text) if cpu else []
    if tf32:
        asks = ("asks tl.dot for TF32" if "tf32" in tf32[0] else
                "leaves tl.dot's input_precision at its default, \"tf32\"")
        return (f"the values come out right here only because CPU mode's Triton interpreter multiplies in float32 "
                f"with numpy, whatever tl.dot is told. `{tf32[0]}` {asks}: on a GPU the tensor cores then round a and "
                "b to 10 bits of mantissa, the products leave the float32 error bound, and this check fails there.\n"
                "Hint: pass input_precision=\"ieee\": acc += tl.dot(a, b, input_precision=\"ieee\").")
    return None


MATMUL = Exercise(
    name="matmul", topic=__name__, cases=matmul_cases, judge=judge_matmul, out_dtype=torch.float32,
    case_names={**CASE_NAMES, "modes": ("memory", "integrity", "speed")},
    out_numel=lambda case: case.args[0].shape[0] * case.args[1].shape[1],
    edges=EDGES,
    bindings={"cuda": Binding("matmul", CPP_SRC),
              "triton": Launch("matmul_triton", TRITON_MEMORY_HINT, _source_verdict)},
    hints={"memory": MEMORY_HINT, "computes": "every element of the product"},
    one_thread={"element": ("element of the product", "elements of the product")},
    speed={"triton": Speed(reference=TRITON_SRC, inputs=speed_product, agrees=product_agrees, where=speed_where,
                           baselines=(("cuBLAS", f"{__name__}:cublas"),))})
MATMUL_TILED = Exercise(
    name="matmul_tiled", topic=__name__, cases=matmul_cases, judge=partial(judge_matmul, tiled=True), out_dtype=torch.float32,
    case_names={**CASE_NAMES, "modes": ("memory", "race", "integrity", "speed")},
    out_numel=lambda case: case.args[0].shape[0] * case.args[1].shape[1],
    edges=EDGES,
    bindings={"cuda": Binding("matmul_static", TILED_CPP_SRC)},
    hints={"memory": MEMORY_HINT, "race": RACE_HINT, "computes": "every element of the product, tile by tile"},
    one_thread={"element": ("element of the product", "elements of the product")},
    speed={"cuda": Speed(reference=TILED_SRC, inputs=speed_product, agrees=product_agrees,
                         where=speed_where, baselines=(("cuBLAS", f"{__name__}:cublas"),))})


@judges(PYTHON)
def check_matmul(fn, case="digits", seed=None):
    """Checks a Python-rung matmul(a, b) against the exact product on one case of inputs."""
    check_python(MATMUL, fn, case, seed)


@judges(PYTHON)
def check_matmul_tiled(fn, case="digits", seed=None):
    """Checks a tiled Python matmul: right on the case, and computed through blk_kernel2d_shar's shared memory."""
    try:
        ran = check_python(MATMUL, fn, case, seed)
    except AssertionError as e:
        raise (with_hint(e, order_hint(MATMUL_TILED)) if _order_matters(fn, case, seed) else e) from None
    # What the runner counted comes from the student's process: it may fail the answer, never pass it alone. The
    # source text (the notebook's cells, as the judge holds them) must show the tile stored and the barrier called.
    name = getattr(fn, "__name__", "your function")
    text = tiled_text(fn, ran)
    seen = tiled_source(text, name) if text else None
    if (not sum(r["writes"] for r in ran) or not sum(r["syncs"] for r in ran)
            or (text and (seen is None or not seen["stores"] or not seen["syncs"]))):
        raise AssertionError(
            f"{name} gave the right answers without filling shared memory and calling syncthreads()"
            f"{'' if seen or not text else ' (its source shows no kernel launched with blk_kernel2d_shar)'}. "
            "Hint: the exercise is the tiled kernel: launch it with blk_kernel2d_shar, copy each tile into `shared`, "
            "call syncthreads(), and compute from the tile.")


def tiled_text(fn, ran):
    """The text a tiled answer is read from: the notebook's code cells where the judge holds them (its stand-in's
    source_text), else the source of the function and of the kernels it launched; None when there is none."""
    if hasattr(fn, "source_text"):
        return fn.source_text
    parts = []
    for f in [fn, *(r.get("kernel") for r in ran)]:
        try:
            parts.append(textwrap.dedent(inspect.getsource(f)))
        except (TypeError, OSError):
            continue
    return parts or None


def _order_matters(fn, case, seed):
    """Whether a failed tiled check's answer changes with the order a block's threads run in."""
    from ..harness.python import call_recorded, case_inputs
    for c in case_inputs(MATMUL, case, seed):
        try:
            runs = [call_recorded(fn, c.args, "", c.where, reversed=reverse)[0] for reverse in (False, True)]
        except AssertionError:
            continue
        if all(isinstance(r, torch.Tensor) for r in runs) and runs[0].shape == runs[1].shape \
                and not torch.equal(runs[0].nan_to_num(), runs[1].nan_to_num()):
            return True
    return False


@judges(CUDA)
def check_matmul_cuda(answer, case="digits", seed=None):
    """Checks a compiled matmul (your cuda_src, or the module load_cuda built) on one case: an input case, "memory" or "integrity"."""
    check_cuda(MATMUL, answer, case, seed)


@judges(CUDA)
def check_matmul_tiled_cuda(answer, case="digits", seed=None):
    """Checks a compiled tiled matmul on one case: an input case, "memory", "race" or "integrity" (which also asks for
    shared memory); "speed" times it against the lesson's tiled kernel and returns the share of the points."""
    return check_cuda(MATMUL_TILED, answer, case, seed, needs_shared=True)


@judges(TRITON)
def check_matmul_triton(fn, case="digits", seed=None):
    """Checks a launch function of a @triton.jit matmul kernel on one case: an input case, "memory" or "integrity";
    "speed" times it against the Triton lesson's kernel and returns the share of the points."""
    try:
        return check_triton(MATMUL, fn, case, seed)
    except AssertionError as e:
        tf32 = tf32_dots(source_of(fn).text) if element_of(e) is not None else []
        if not tf32 or "input_precision" in str(e):
            raise
        _, hint = split_hint(str(e))
        raise with_hint(e, f"{hint + ' ' if hint else ''}Besides, `{tf32[0]}` leaves TF32 on (tl.dot's default "
                           "input_precision=\"tf32\"), which alone puts the products outside the float32 bound on a "
                           "GPU: pass input_precision=\"ieee\".") from None

"""Byte-identical grayscale (drills/01): the colours where the order of roundings decides, an exact judge, the checks.

The lessons' checks let a pixel differ by one where its exact grey value is within 0.001 of a whole number,
because a correct kernel may round differently there. This drill asks for the same bytes as the float32
reference, which multiplies, then adds, rounding each result to float32: 0.2989*r, 0.5870*g, their sum,
0.1140*b, the sum. Where the exact value sits within a few millionths of a whole number, any other order
of roundings can truncate to the number below: a fused multiply-add (nvcc makes `a*b + c` one FFMA, with
one rounding), double arithmetic (a constant without its `f`), the products added in another order.
"""
import torch

from ..harness.cuda import Binding, check_cuda
from ..harness.exercise import Case, Exercise, expect_tensor, first, judges, wrong_elements
from ..harness.python import check_python
from ..harness.rungs import CUDA, PYTHON
from ..images import photo, small_photo
from .grayscale import CPP_SRC, judge_grey, random_image, rgb2grey, rgb2grey_exact

__all__ = ("rounding_edges", "check_grey_identical", "check_grey_identical_cuda")

W32 = [torch.tensor(w, dtype=torch.float32).double() for w in (0.2989, 0.5870, 0.1140)]  # the weights as float32

# The 317 colours (r << 16 | g << 8 | b) of all 16,777,216 whose truncated grey value changes with the order of
# roundings: where nvcc's fused multiply-adds (27 colours), another order of fmaf (21 and 20), double arithmetic
# (302) or the float32 products added in another order (27 and 21) give another byte than the reference. Found
# by computing every colour each way (tests/test_drills.py checks each one; _candidates computes them).
# Double arithmetic fused into multiply-adds, as nvcc compiles it on a GPU, tips 322 colours (318 in the other
# order), 202 (176) of them among these: enough to tell it apart (the H200 gave those 202), so they stay 317.
EDGE_COLOURS = (
    18456, 32423, 36912, 41180, 45669, 46611, 60578, 65067, 660742, 669499, 671162, 675651, 679198, 707353, 709958,
    1315332, 1321484, 1324089, 1338056, 1338998, 1339940, 1342545, 1346813, 1347755, 1348697, 1349639, 1351302,
    1352244, 1355791, 1357454, 1358396, 1361943, 1366211, 1980342, 1981284, 1982226, 1988378, 1999740, 2000682,
    2004229, 2008497, 2009439, 2010381, 2012986, 2031442, 2627117, 2630664, 2639421, 2642968, 2648178, 2649120,
    2661424, 2673728, 2676333, 2677996, 2679880, 2682485, 2684148, 2685090, 2686032, 3286917, 3306315, 3310583,
    3312467, 3315072, 3319561, 3321224, 3325713, 3329981, 3334470, 3336133, 3338017, 3338738, 3340622, 3948601,
    3962568, 3963510, 3964452, 3967057, 3973209, 3976756, 3990723, 3992607, 3995212, 3996875, 4592550, 4602249,
    4603191, 4611006, 4611948, 4615495, 4624252, 4628741, 4635614, 4637498, 4640103, 4648860, 5254234, 5255176,
    5261328, 5268201, 5270085, 5272690, 5274353, 5278842, 5283331, 5285936, 5287599, 5289483, 5296356, 5298240,
    5921128, 5922070, 5929885, 5930827, 5934374, 5943131, 5950225, 6578323, 6591569, 6599384, 6610025, 6612630,
    6615235, 7215399, 7218004, 7218946, 7223214, 7225098, 7227703, 7231971, 7236460, 7237402, 7242612, 7251369,
    7253253, 7255858, 7260126, 7262010, 7264615, 7266278, 7268162, 7270767, 7273372, 7883956, 7892713, 7894597,
    7897202, 7912111, 7920868, 7922752, 7925357, 7927020, 7928904, 8533336, 8542093, 8546582, 8567643, 8570248,
    8577342, 8579005, 8580889, 8583494, 8585157, 9178227, 9189589, 9191473, 9195020, 9195741, 9200230, 9202835,
    9206382, 9215139, 9216081, 9217744, 9219628, 9223896, 9228385, 9230990, 9235479, 9239747, 9843458, 9852215,
    9860972, 9867124, 9880370, 10488349, 10495222, 10499711, 10505863, 10508468, 10510352, 10522656, 10525261,
    10526924, 10529529, 10538507, 10540170, 10542775, 10545380, 10550811, 11143660, 11156906, 11177246, 11181514,
    11192155, 11194760, 11205401, 11814101, 11815985, 11842256, 11844140, 11852897, 11855502, 11859049, 11861654,
    12463481, 12467970, 12472238, 12474122, 12475785, 12476727, 12484542, 12487147, 12495183, 12496846, 12497788,
    12500393, 12504882, 12509150, 12511034, 12513639, 13124223, 13134864, 13147168, 13149773, 13154041, 13163019,
    13169892, 13171776, 13773603, 13777871, 13782360, 13797269, 13801758, 13806026, 13810515, 13814783, 13823761,
    14422041, 14427251, 14430798, 14436008, 14437892, 14440497, 14444044, 14450196, 14452801, 14455406, 14457069,
    14466768, 14468652, 14470315, 14472920, 14474804, 14478351, 14480956, 14482619, 15087993, 15092482, 15104786,
    15107391, 15109054, 15111659, 15122300, 15124905, 15131057, 15132941, 15134604, 15135546, 15137209, 15138151,
    15761039, 15774285, 15785647, 15787531, 15789194, 15791799, 16384869, 16385811, 16386532, 16387474, 16388416,
    16392684, 16393626, 16396231, 16398115, 16399778, 16404267, 16407814, 16408535, 16410419, 16413024, 16413966,
    16414687, 16418234, 16425328, 16426270, 16427933, 16430538, 16435027, 16435969, 16438574, 16441179, 16443784,
    16447331, 16448273
)


def rounding_edges():
    """A (3, 1, 317) uint8 image of the 317 colours where the order of roundings changes the grey byte (taught in drills/01)."""
    v = torch.tensor(EDGE_COLOURS)
    return torch.stack([v >> 16, (v >> 8) & 255, v & 255]).to(torch.uint8).view(3, 1, -1)


def _f32(t):
    return t.float().double()  # round to float32, keep computing in float64


def _fma(a, x, c):
    # a*x + c rounded once to float32. Exact: a is a float32 weight, x a byte, c a float32 below 256, so the
    # exact sum needs fewer than 53 bits and float64 holds it; the one rounding is the cast.
    return _f32(a * x + c)


def _double_fma(r, g, b, plain, order):
    """The double sum with nvcc's contraction into fused multiply-adds, exact where a pixel is near a whole number.

    A double product of a byte is not exact in float64, so the one rounding of each fma is done with fractions,
    and only where it can change the byte: where the exact value is within 1e-6 of a whole number.
    """
    from fractions import Fraction

    def fma(a, x, c):
        return float(Fraction(a) * int(x) + Fraction(c))  # one rounding: a ratio of integers converts exactly rounded
    exact = 0.2989 * r + 0.5870 * g + 0.1140 * b
    out = plain.clone()
    for i in ((exact - exact.round()).abs() < 1e-6).nonzero().flatten().tolist():
        ri, gi, bi = int(r[i]), int(g[i]), int(b[i])
        if order == "nvcc":
            out[i] = fma(0.1140, bi, fma(0.2989, ri, 0.5870 * gi))
        else:
            out[i] = fma(0.1140, bi, fma(0.5870, gi, 0.2989 * ri))
    return out


def _candidates(x):
    """{mistake: its grey image} for the ways of computing a grey value that round in another order than the reference."""
    r, g, b = x.double()
    w0, w1, w2 = W32
    double = (0.2989 * r + 0.5870 * g) + 0.1140 * b
    flat = (r.flatten(), g.flatten(), b.flatten())
    ways = {
        "fma_nvcc": _fma(w2, b, _fma(w0, r, _f32(w1 * g))),
        "fma_in_order": _fma(w2, b, _fma(w1, g, _f32(w0 * r))),
        "fma_reversed": _fma(w0, r, _fma(w1, g, _f32(w2 * b))),
        "double": double,
        "double_fma_nvcc": _double_fma(*flat, double.flatten(), "nvcc").view(r.shape),
        "double_fma_in_order": _double_fma(*flat, double.flatten(), "in_order").view(r.shape),
        "order_r_gb": _f32(_f32(w0 * r) + _f32(_f32(w1 * g) + _f32(w2 * b))),
        "order_rb_g": _f32(_f32(_f32(w0 * r) + _f32(w2 * b)) + _f32(w1 * g)),
    }
    return {k: v.floor().to(torch.int16) for k, v in ways.items()}


FIX = ("compute as the reference does, multiplying and adding separately in float32 and in its order: in CUDA "
       "__fadd_rn(__fadd_rn(__fmul_rn(0.2989f, r), __fmul_rn(0.5870f, g)), __fmul_rn(0.1140f, b)) (nvcc never "
       "fuses these), or plain arithmetic compiled with -fmad=false; in Python, 0.2989*x[i] + 0.5870*x[i+n] + "
       "0.1140*x[i+2*n] on the tensor's values")
WHY = {
    "fma_nvcc": "your pixels are what nvcc's fused multiply-adds give: it compiles 0.2989f*r + 0.5870f*g + 0.1140f*b "
                "into fmaf(0.1140f, b, fmaf(0.2989f, r, 0.5870f*g)), one FMUL and two FFMAs, rounding 3 times where "
                "the reference rounds 5 times",
    "fma_in_order": "your pixels are what fused multiply-adds give (fmaf(0.1140f, b, fmaf(0.5870f, g, 0.2989f*r)): "
                    "fmaf, __fmaf_rn or a contracting compiler)",
    "fma_reversed": "your pixels are what fused multiply-adds from blue to red give (fmaf(0.2989f, r, fmaf(0.5870f, g, "
                    "0.1140f*b)))",
    "double": "your pixels are what double arithmetic gives: in C a constant without its f (0.2989) is a double and "
              "pulls the whole sum into double; in Python, float(x[i]) or .item() does the same",
    "double_fma_nvcc": "your pixels are what double arithmetic gives (nvcc fusing it into double multiply-adds): in C a "
                       "constant without its f (0.2989) is a double and pulls the whole sum into double",
    "double_fma_in_order": "your pixels are what double arithmetic gives (fused into double multiply-adds): in C a "
                           "constant without its f (0.2989) is a double and pulls the whole sum into double",
    "order_r_gb": "your pixels are what adding the products in another order gives: r + (g + b) instead of "
                  "(r + g) + b",
    "order_rb_g": "your pixels are what adding the products in another order gives: (r + b) + g instead of "
                  "(r + g) + b",
}


def identical_cases(case, seed, rung):
    """The named inputs of a byte-identical check for a rung: Cases of one (3, H, W) uint8 image each."""
    if case == "edges":
        return [Case("the 317 rounding-edge colours (a 1x317 image)", (rounding_edges(),))]
    if case == "photo":
        img = small_photo() if rung.small else photo()
        return [Case(f"the photo ({img.shape[1]}x{img.shape[2]})", (img,))]
    if case == "random":
        g = torch.Generator().manual_seed(seed)
        largest = 60 if rung.small else 1100
        sizes = [tuple(int(v) for v in torch.randint(1, largest + 1, (2,), generator=g)) for _ in range(3)]
    else:
        sizes = {"tiny": [(1, 1)], "ragged": [(7, 37), (1, 257), (33, 31)], "large": [(2000, 3000)]}[case]
    return [Case(f"a {h}x{w} image", (random_image(h, w, seed=h * 10007 + w + (seed or 0)),)) for h, w in sizes]


def judge_identical(yours, case, what, unwritten=None):
    """Asserts yours holds the float32 reference's bytes exactly; a near miss names the order of roundings it shows."""
    judge_grey(yours, case, what, unwritten)  # anything beyond a rounding is judged and explained as in the lessons
    x, where = case.args[0], case.where
    h, w = x.shape[1:]
    expect_tensor(yours, what, where, (h, w), torch.uint8, {})
    yours = yours.cpu().to(torch.int16)
    ref = rgb2grey(x).to(torch.int16)
    bad = yours != ref
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    idx, at = first(bad)
    r, g, b = (int(c) for c in x[(slice(None), *idx)])
    exact = float(rgb2grey_exact(x)[tuple(idx)])
    msg = (f"{what}: {n_bad:,} of {h * w:,} pixels are not the reference's bytes for {where} (each off by one, where "
           f"the exact value is within 0.001 of a whole number).\n"
           f"  first at {at}: yours {int(yours[tuple(idx)])}, the float32 reference {int(ref[tuple(idx)])} "
           f"(r={r}, g={g}, b={b}: the exact value is {exact:.9f})")
    # The orders of roundings differ only where the exact value is near a whole number: computed there alone.
    exact_all = rgb2grey_exact(x).double()
    near = (exact_all - exact_all.round()).abs() < 1e-3
    fits = [k for k, v in _candidates(x[:, near]).items() if torch.equal(v, yours[near])] \
        if torch.equal(yours[~near], ref[~near]) else []
    if len(fits) == 1:
        hint = WHY[fits[0]] + ". To get the reference's bytes, " + FIX + "."
    elif fits:
        hint = (f"on {where} your pixels fit {len(fits)} orders of roundings, so the checker cannot tell which is "
                "yours: " + "; ".join(f"({k}) {WHY[f]}" for k, f in enumerate(fits, 1)) + ". To get the reference's "
                "bytes, " + FIX + ".")
    else:
        hint = ("your pixels round in an order the checker cannot name; where the exact value is this close to a whole "
                "number, every rounding counts. To get the reference's bytes, " + FIX + ".")
    raise wrong_elements(f"{msg}\nHint: {hint}", bad)


CASE_NAMES = {"python": ("edges", "photo", "ragged", "random"),
              "cuda": ("tiny", "ragged", "edges", "photo", "large", "random"), "modes": ("memory", "integrity")}
GREY_IDENTICAL = Exercise(
    name="rgb2grey_identical", topic=__name__, cases=identical_cases, judge=judge_identical, out_dtype=torch.uint8,
    case_names=CASE_NAMES, out_numel=lambda case: case.args[0][0].numel(), bindings={"cuda": Binding("rgb_to_grayscale", CPP_SRC)},
    edges=("tiny",),  # a 1x1 image leaves 255 of a 256-thread block past the end (issue 38); ragged has one row
    hints={"memory": "a thread past the last pixel must do nothing: guard the body with `if (i < n)`, and index only "
                     "0 <= i < n (x up to 3*n - 1).",
           "computes": "every pixel"},
    one_thread={"element": ("pixel", "pixels")})


@judges(PYTHON)
def check_grey_identical(fn, case="edges", seed=None):
    """Checks that a Python-rung grayscale function gives exactly the float32 reference's bytes on one case."""
    check_python(GREY_IDENTICAL, fn, case, seed)


@judges(CUDA)
def check_grey_identical_cuda(answer, case="edges", seed=None):
    """Checks that a compiled rgb_to_grayscale gives exactly the float32 reference's bytes on one case, "memory" or "integrity"."""
    check_cuda(GREY_IDENTICAL, answer, case, seed)

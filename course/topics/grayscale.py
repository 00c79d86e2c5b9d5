"""Grayscale: the reference, the inputs each check feeds an answer, how a grey image is judged, and the checks."""
import torch

from ..harness.cuda import check_cuda
from ..harness.exercise import Case, Exercise, expect_tensor, first, judges
from ..harness.python import check_python
from ..images import photo, small_photo

# Luma weights for red, green and blue (ITU-R BT.601, as in the lecture).
WEIGHTS = (0.2989, 0.5870, 0.1140)
# A float32 kernel computes the weighted sum with a rounding error far below 0.001 (FMA or not),
# so it may land on either side of an integer only where the exact value is that close to one.
# Rounding instead of truncating, or other weights, moves values by far more on most pixels.
GREY_SLACK = 1e-3
CPP_SRC = "torch::Tensor rgb_to_grayscale(torch::Tensor input);"


def rgb2grey(x):
    """Grayscale of a (3, H, W) uint8 image in float32, truncated to uint8 like the kernels."""
    r, g, b = x.float()
    return (WEIGHTS[0] * r + WEIGHTS[1] * g + WEIGHTS[2] * b).to(torch.uint8)


def rgb2grey_exact(x):
    """The grey values before truncation, in float64: what a float32 kernel approximates."""
    r, g, b = x.double()
    return WEIGHTS[0] * r + WEIGHTS[1] * g + WEIGHTS[2] * b


def _random_image(h, w, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)


def _random_sizes(seed, count, largest):
    g = torch.Generator().manual_seed(seed)
    return [tuple(int(v) for v in torch.randint(1, largest + 1, (2,), generator=g)) for _ in range(count)]


def grey_cases(case, seed, rung):
    """The named inputs of a grayscale check for a rung: Cases of one (3, H, W) uint8 image each."""
    python = rung == "python"
    if case == "photo":
        img = small_photo() if python else photo()
        return [Case(f"the photo ({img.shape[1]}x{img.shape[2]})", (img,))]
    if case == "random":
        sizes = _random_sizes(seed, 3, 200) if python else _random_sizes(seed, 4, 700)
    else:
        sizes = {
            "tiny": [(1, 1)],
            "ragged": [(7, 37), (1, 257), (33, 31)],  # h*w = 259, 257, 1023: not multiples of a block
            "tall_wide": [(40, 1), (1, 40)] if python else [(1000, 1), (1, 1000), (3, 3001)],
            "large": [(2000, 3000)],
        }[case]
    return [Case(f"a {h}x{w} image", (_random_image(h, w, seed=h * 10007 + w + (seed or 0)),)) for h, w in sizes]


def judge_grey(yours, case, what, unwritten=None):
    """Asserts yours is the grayscale of the case's image: uint8, (H, W), each pixel the truncated weighted sum."""
    x, where = case.args[0], case.where
    h, w = x.shape[1:]
    expect_tensor(yours, what, where, (h, w), torch.uint8, {
        "return": ", e.g. `return res.view(h, w)`",
        "shape": "the output has one value per pixel: view it as (h, w).",
        "dtype": "create the output with the input's dtype (x.dtype / input.options())."})
    yours = yours.cpu().to(torch.int16)
    exact = rgb2grey_exact(x)
    lo, hi = (exact - GREY_SLACK).floor(), (exact + GREY_SLACK).floor()
    bad = (yours != lo) & (yours != hi)
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    idx, at = first(bad)
    mine, want, ex = int(yours[tuple(idx)]), int(lo[tuple(idx)]), float(exact[tuple(idx)])
    r, g, b = (int(c) for c in x[(slice(None), *idx)])
    msg = (f"{what}: {n_bad:,} of {h * w:,} pixels are wrong for {where}.\n"
           f"  first at {at}: yours {mine}, expected {want} "
           f"(r={r}, g={g}, b={b}: 0.2989*r + 0.5870*g + 0.1140*b = {ex:.4f}, truncated to {want})")
    never = int((bad & unwritten).sum()) if unwritten is not None else 0
    if never:
        msg += (f"\n  {never:,} of the wrong pixels still hold 171, the value the memory had "
                "before your code ran: they were probably never written.")
    frac = exact - exact.floor()
    rounded_up = (yours - lo == 1) & (frac >= 0.5 - GREY_SLACK)
    if bool(rounded_up[bad].all()) and n_bad >= 0.9 * int((frac >= 0.5 + GREY_SLACK).sum()):
        hint = ("every wrong pixel is one too high where the exact value's fraction is 0.5 or more: "
                "that is rounding. A grey value is truncated (converting to uint8 drops the fraction).")
    elif unwritten is not None and never == n_bad:
        hint = ("make sure every pixel gets a thread: the grid must cover h*w pixels "
                "(blocks = cdiv(h*w, threads)), and each thread writes out[i].")
    else:
        hint = ("check the weights (0.2989, 0.5870, 0.1140) and the channel offsets: the image is CHW, "
                "so red is x[i], green x[i+n] and blue x[i+2*n] with n = h*w.")
    raise AssertionError(f"{msg}\nHint: {hint}")


RGB2GREY = Exercise(
    name="rgb2grey", topic=__name__, cases=grey_cases, judge=judge_grey, out_dtype=torch.uint8,
    case_names={"python": ("tiny", "ragged", "tall_wide", "photo", "random"),
                "cuda": ("tiny", "ragged", "tall_wide", "photo", "large", "random"), "modes": ("memory", "integrity")},
    out_numel=lambda case: case.args[0][0].numel(), func="rgb_to_grayscale", cpp_src=CPP_SRC,
    hints={"memory": "a thread past the last pixel must do nothing: guard the body with `if (i < n)`, "
                     "and index only 0 <= i < n (x up to 3*n - 1).",
           "computes": "every pixel"})


@judges("python")
def check_rgb2grey(fn, case="photo", seed=None):
    """Checks a Python-rung grayscale function against the reference on one case of inputs."""
    check_python(RGB2GREY, fn, case, seed)


@judges("cuda")
def check_rgb2grey_cuda(answer, case="photo", func="rgb_to_grayscale", seed=None):
    """Checks a compiled rgb_to_grayscale (your cuda_src, or the module load_cuda built) on one case: an input case, "memory" or "integrity"."""
    if func != RGB2GREY.func:
        raise ValueError(f"the grayscale exercise's function is {RGB2GREY.func}, not {func!r}")
    check_cuda(RGB2GREY, answer, case, seed)

"""The one-line checks that test cells call: they raise AssertionError with a message a beginner can act on."""
import torch

from .cuda import module_path
from .device import require_gpu
from .images import photo, small_photo
from .isolation import SENTINEL, run_isolated
from .reference import rgb2grey_exact

# A float32 kernel computes the weighted sum with a rounding error far below 0.001 (FMA or not),
# so it may land on either side of an integer only where the exact value is that close to one.
# Rounding instead of truncating, or other weights, moves values by far more on most pixels.
GREY_SLACK = 1e-3


def _random_image(h, w, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)


def grey_cases(case, python=False):
    """The named inputs of a grayscale check: (description, (3, H, W) uint8 image) pairs."""
    sizes = {
        "tiny": [(1, 1)],
        "ragged": [(7, 37), (1, 257), (33, 31)],  # h*w = 259, 257, 1023: not multiples of a block
        "tall_wide": [(40, 1), (1, 40)] if python else [(1000, 1), (1, 1000), (3, 3001)],
        "large": [(2000, 3000)],
    }
    if case == "photo":
        img = small_photo() if python else photo()
        return [(f"the photo ({img.shape[1]}x{img.shape[2]})", img)]
    if case not in sizes or (python and case == "large"):
        names = ["tiny", "ragged", "tall_wide", "photo"] + ([] if python else ["large"])
        raise ValueError(f"unknown case {case!r}; choose one of {names}")
    return [(f"a {h}x{w} image", _random_image(h, w, seed=h * 10007 + w)) for h, w in sizes[case]]


def _first(mask):
    idx = mask.nonzero()[0].tolist()
    return idx, ", ".join(f"{n} {i}" for n, i in zip(("row", "col"), idx))


def check_grey(yours, x, what, where, unwritten=None):
    """Asserts yours is the grayscale of x: uint8, (H, W), each pixel the truncated weighted sum."""
    h, w = x.shape[1:]
    if not isinstance(yours, torch.Tensor):
        raise AssertionError(f"{what} returned {type(yours).__name__}, not a tensor, for {where}. "
                             "Hint: return the output tensor, e.g. `return res.view(h, w)`.")
    if tuple(yours.shape) != (h, w):
        raise AssertionError(f"{what} returned shape {tuple(yours.shape)} for {where}; expected ({h}, {w}). "
                             "Hint: the output has one value per pixel: view it as (h, w).")
    if yours.dtype != torch.uint8:
        raise AssertionError(f"{what} returned dtype {yours.dtype} for {where}; expected torch.uint8. "
                             "Hint: create the output with the input's dtype (x.dtype / input.options()).")
    yours = yours.cpu().to(torch.int16)
    exact = rgb2grey_exact(x)
    lo, hi = (exact - GREY_SLACK).floor(), (exact + GREY_SLACK).floor()
    bad = (yours != lo) & (yours != hi)
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    idx, at = _first(bad)
    mine, want, ex = int(yours[tuple(idx)]), int(lo[tuple(idx)]), float(exact[tuple(idx)])
    r, g, b = (int(c) for c in x[(slice(None), *idx)])
    msg = (f"{what}: {n_bad:,} of {h * w:,} pixels are wrong for {where}.\n"
           f"  first at {at}: yours {mine}, expected {want} "
           f"(r={r}, g={g}, b={b}: 0.2989*r + 0.5870*g + 0.1140*b = {ex:.4f}, truncated to {want})")
    if unwritten is not None:
        never = int((bad & (yours == unwritten)).sum())
        if never:
            msg += (f"\n  {never:,} of the wrong pixels still hold {unwritten}, the value the memory had "
                    "before your kernel ran: they were probably never written.")
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


def check_rgb2grey(fn, case="photo"):
    """Checks a Python-rung grayscale function against the reference on one case of inputs."""
    if not callable(fn):
        raise TypeError(f"pass your function itself, e.g. check_rgb2grey(rgb2grey_py), not {fn!r}")
    what = getattr(fn, "__name__", "your function")
    for where, x in grey_cases(case, python=True):
        before = x.clone()
        try:
            yours = fn(x)
        except Exception as e:
            raise AssertionError(f"{what} raised {type(e).__name__} for {where}: {e}") from e
        if not torch.equal(x, before):
            raise AssertionError(f"{what} changed its input image for {where}. "
                                 "Hint: write only into the output tensor.")
        check_grey(yours, x, what, where)
    print(f"{what}: {case} passed")


def check_rgb2grey_cuda(module, case="photo", func="rgb_to_grayscale"):
    """Checks a compiled rgb_to_grayscale on the GPU, in a child process, on one case of inputs."""
    require_gpu(f"check_rgb2grey_cuda({case!r})")
    cases = grey_cases(case)
    if not hasattr(module, func):
        raise AssertionError(f"the module has no function {func}: name it in funcs=[...] of load_cuda")
    outputs = run_isolated(module_path(module), func, [x for _, x in cases],
                           out_nbytes=[x[0].numel() for _, x in cases])
    for (where, x), out in zip(cases, outputs):
        if out["input_changed"]:
            raise AssertionError(f"{func} changed its input image for {where}. "
                                 "Hint: the kernel should only write into the output.")
        if isinstance(out["value"], torch.Tensor):
            if not out["device"].startswith("cuda"):
                raise AssertionError(f"{func} returned a tensor on {out['device']} for {where}; "
                                     "expected it on the GPU. Hint: allocate it with input.options().")
            if not out["contiguous"]:
                raise AssertionError(f"{func} returned a non-contiguous tensor for {where}.")
        check_grey(out["value"], x, func, where, unwritten=SENTINEL)
    print(f"{func}: {case} passed")

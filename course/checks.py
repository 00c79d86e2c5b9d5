"""The one-line checks that test cells call: they raise AssertionError with a message a beginner can act on."""
import contextlib
import io
import signal
import threading

import torch

from .cuda import module_path
from .device import cpu_mode, require_gpu
from .images import photo, small_photo
from .isolation import SENTINEL, OutOfBounds, run_isolated
from .reference import rgb2grey_exact

# A float32 kernel computes the weighted sum with a rounding error far below 0.001 (FMA or not),
# so it may land on either side of an integer only where the exact value is that close to one.
# Rounding instead of truncating, or other weights, moves values by far more on most pixels.
GREY_SLACK = 1e-3
PYTHON_TIMEOUT = 60  # seconds: the slowest right answer takes about 2 s on the largest Python case


def _random_image(h, w, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)


def _random_sizes(seed, count, largest):
    g = torch.Generator().manual_seed(seed)
    return [tuple(int(v) for v in torch.randint(1, largest + 1, (2,), generator=g)) for _ in range(count)]


CASES = ["tiny", "ragged", "tall_wide", "photo", "large", "random"]


def grey_cases(case, python=False, seed=None):
    """The named inputs of a grayscale check: (description, (3, H, W) uint8 image) pairs."""
    sizes = {
        "tiny": [(1, 1)],
        "ragged": [(7, 37), (1, 257), (33, 31)],  # h*w = 259, 257, 1023: not multiples of a block
        "tall_wide": [(40, 1), (1, 40)] if python else [(1000, 1), (1, 1000), (3, 3001)],
        "large": [(2000, 3000)],
    }
    names = [c for c in CASES if not (python and c == "large")]
    if case not in names:
        raise ValueError(f"unknown case {case!r}; choose one of {names}")
    if case == "photo":
        img = small_photo() if python else photo()
        return [(f"the photo ({img.shape[1]}x{img.shape[2]})", img)]
    if case == "random":
        if seed is None:
            raise ValueError("the random case needs a seed: check_...(fn, 'random', seed=1234)")
        sizes["random"] = _random_sizes(seed, 3, 200) if python else _random_sizes(seed, 4, 700)
    return [(f"a {h}x{w} image", _random_image(h, w, seed=h * 10007 + w + (seed or 0)))
            for h, w in sizes[case]]


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


class _TimedOut(BaseException):
    """Raised inside a student's function when it runs past the check's time limit."""


@contextlib.contextmanager
def _time_limit(seconds):
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def stop(signum, frame):
        raise _TimedOut()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def call_quietly(fn, x, what, where, seconds=PYTHON_TIMEOUT):
    """Calls fn(x) with its printing captured and a time limit; any failure becomes an AssertionError."""
    try:
        with _time_limit(seconds), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            return fn(x)
    except _TimedOut:
        raise AssertionError(f"{what} did not finish within {seconds} s for {where} and was stopped. "
                             "Hint: a loop that never ends (check its condition and what it counts).") from None
    except Exception as e:
        raise AssertionError(f"{what} raised {type(e).__name__} for {where}: {e}") from e


def check_rgb2grey(fn, case="photo", seed=None):
    """Checks a Python-rung grayscale function against the reference on one case of inputs."""
    if not callable(fn):
        raise TypeError(f"pass your function itself, e.g. check_rgb2grey(rgb2grey_py), not {fn!r}")
    what = getattr(fn, "__name__", "your function")
    for where, x in grey_cases(case, python=True, seed=seed):
        before = x.clone()
        yours = call_quietly(fn, x, what, where)
        if not torch.equal(x, before):
            raise AssertionError(f"{what} changed its input image for {where}. "
                                 "Hint: write only into the output tensor.")
        check_grey(yours, x, what, where)
    print(f"{what}: {case} passed")


# Creating the output and viewing tensors is the wrapper's job; computing is the kernel's.
ALLOWED_OPS = {"aten::" + op for op in (
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "zero_", "fill_", "ones", "full",
    "view", "reshape", "_reshape_alias", "_unsafe_view", "as_strided", "select", "slice", "flatten",
    "unsqueeze", "squeeze", "expand", "contiguous", "alias", "detach", "resize_", "t", "transpose",
    "permute", "narrow", "lift_fresh", "to", "size", "stride", "numel", "data_ptr", "set_")}
LIBRARY_KERNELS = ("at::", "at_cuda_detail", "cub::", "cublas", "cudnn", "cutlass", "nvjet", "sm90_")


def own_kernels(events):
    """The kernels a profiled call launched that are not PyTorch's or a library's."""
    launched = [name for kind, name in events if kind == "cuda"]
    launched += [name.split("::", 1)[1] for kind, name in events if name.startswith("cuda_cpu_launch::")]
    return [k for k in launched if not any(lib in k for lib in LIBRARY_KERNELS)]


def torch_ops(events):
    """The PyTorch operations a profiled call ran that compute (anything beyond creating and viewing)."""
    return sorted({name for kind, name in events
                   if kind == "cpu" and name.startswith("aten::") and name not in ALLOWED_OPS})


def _check_integrity(func, where, out):
    ops, mine = torch_ops(out["events"]), own_kernels(out["events"])
    if ops:
        raise AssertionError(f"{func} computed with the PyTorch operation(s) {', '.join(ops)} for {where}. "
                             "Hint: this exercise is the kernel: the wrapper only creates the output "
                             "(torch::empty) and launches your kernel, which computes every pixel.")
    if not mine:
        raise AssertionError(f"{func} launched no kernel of its own for {where}. Hint: the output must come "
                             "from your kernel: launch it with kernel<<<blocks, threads>>>(...).")
    first, again = out["value"], out["again"]
    if isinstance(first, torch.Tensor) and isinstance(again, torch.Tensor) and first.shape == again.shape \
            and not torch.equal(first, again):
        differ = first != again
        idx = differ.nonzero()[0].tolist()
        raise AssertionError(
            f"{func} gave different outputs in two runs on the same input for {where}: "
            f"{int(differ.sum()):,} values differ, the first at index {idx}: {int(first[tuple(idx)])}, "
            f"then {int(again[tuple(idx)])}.\nHint: that is a race: threads write the same place, or read "
            "what other threads write, in an order that changes from run to run.")


def check_rgb2grey_cuda(module, case="photo", func="rgb_to_grayscale", seed=None):
    """Checks a compiled rgb_to_grayscale in a child process on one case: an input case, "memory" or "integrity"."""
    if case not in CASES + ["memory", "integrity"]:
        raise ValueError(f"unknown case {case!r}; choose one of {CASES + ['memory', 'integrity']}")
    if not cpu_mode():
        require_gpu(f"check_rgb2grey_cuda({case!r})")
    if not hasattr(module, func):
        raise AssertionError(f"the module has no function {func}: name it in funcs=[...] of load_cuda")
    mode = case if case in ("memory", "integrity") else "run"
    cases = grey_cases("ragged" if mode != "run" else case, seed=seed)
    try:
        outputs = run_isolated(module_path(module), func, [x for _, x in cases],
                               out_nbytes=[x[0].numel() for _, x in cases], mode=mode)
    except OutOfBounds as e:
        raise AssertionError(
            f"{func}: the memory check found out-of-bounds accesses on the ragged sizes: {e}.\n"
            "Hint: a thread past the last pixel must do nothing: guard the body with `if (i < n)`, "
            "and index only 0 <= i < n (x up to 3*n - 1).") from None
    want = "cpu" if cpu_mode() else "cuda"
    for (where, x), out in zip(cases, outputs):
        if out["input_changed"]:
            raise AssertionError(f"{func} changed its input image for {where}. "
                                 "Hint: the kernel should only write into the output.")
        if isinstance(out["value"], torch.Tensor):
            if not out["device"].startswith(want):
                raise AssertionError(f"{func} returned a tensor on {out['device']} for {where}; "
                                     f"expected it on {want}. Hint: allocate it with input.options().")
            if not out["contiguous"]:
                raise AssertionError(f"{func} returned a non-contiguous tensor for {where}.")
        if mode == "integrity":
            _check_integrity(func, where, out)
        # Under the memory check every tensor is a fresh allocation: no sentinel to find there.
        check_grey(out["value"], x, func, where, unwritten=None if mode == "memory" else SENTINEL)
    print(f"{func}: {case} passed")

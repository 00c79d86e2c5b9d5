"""Grayscale: the reference, the inputs each check feeds an answer, how a grey image is judged, and the checks."""
import itertools

import torch

from ..cuda import cuda_begin
from ..harness.cuda import Binding, binding, check_cuda
from ..harness.exercise import Case, Exercise, expect_tensor, first, judges, wrong_elements
from ..harness.python import check_python
from ..harness.rungs import CUDA, PYTHON, TRITON
from ..harness.speed import Speed
from ..harness.triton import Launch, check_triton
from ..images import photo, small_photo

__all__ = ("rgb2grey", "check_rgb2grey", "check_rgb2grey_cuda", "check_rgb2grey_triton")

# Luma weights for red, green and blue (ITU-R BT.601, as in the lecture).
WEIGHTS = (0.2989, 0.5870, 0.1140)
# A float32 kernel computes the weighted sum with a rounding error far below 0.001 (FMA or not),
# so it may land on either side of an integer only where the exact value is that close to one.
# Rounding instead of truncating, or other weights, moves values by far more on most pixels.
GREY_SLACK = 1e-3
CPP_SRC = "torch::Tensor rgb_to_grayscale(torch::Tensor input);"
# The L3 lesson's solution: what overrun_source, the build tests and the compile benchmark start from.
CUDA_SRC = cuda_begin + r"""
__global__ void rgb_to_grayscale_kernel(unsigned char* x, unsigned char* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = 0.2989f*x[i] + 0.5870f*x[i+n] + 0.1140f*x[i+2*n];
}

torch::Tensor rgb_to_grayscale(torch::Tensor input) {
    CHECK_INPUT(input);
    int h = input.size(1);
    int w = input.size(2);
    int n = h * w;
    auto output = torch::empty({h, w}, input.options());
    int threads = 256;
    if (n > 0) {
        rgb_to_grayscale_kernel<<<cdiv(n, threads), threads>>>(
            input.data_ptr<unsigned char>(), output.data_ptr<unsigned char>(), n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return output;
}
"""


def rgb2grey(x):
    """Grayscale of a (3, H, W) uint8 image in float32, truncated to uint8 like the kernels."""
    r, g, b = x.float()
    return (WEIGHTS[0] * r + WEIGHTS[1] * g + WEIGHTS[2] * b).to(torch.uint8)


def rgb2grey_exact(x):
    """The grey values before truncation, in float64: what a float32 kernel approximates."""
    r, g, b = x.double()
    return WEIGHTS[0] * r + WEIGHTS[1] * g + WEIGHTS[2] * b


def random_image(h, w, seed):
    """A (3, h, w) uint8 image of seeded random values: the same for the same size and seed."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)


def _random_sizes(seed, count, largest):
    g = torch.Generator().manual_seed(seed)
    return [tuple(int(v) for v in torch.randint(1, largest + 1, (2,), generator=g)) for _ in range(count)]


def grey_cases(case, seed, rung):
    """The named inputs of a grayscale check for a rung: Cases of one (3, H, W) uint8 image each."""
    if case == "photo":
        img = small_photo() if rung.small else photo()
        return [Case(f"the photo ({img.shape[1]}x{img.shape[2]})", (img,))]
    if case == "random":
        sizes = _random_sizes(seed, 3, 200) if rung.small else _random_sizes(seed, 4, 700)
    else:
        sizes = {
            "tiny": [(1, 1)],
            "ragged": [(7, 37), (1, 257), (33, 31)],  # h*w = 259, 257, 1023: not multiples of a block
            "tall_wide": [(40, 1), (1, 40)] if rung.small else [(1000, 1), (1, 1000), (3, 3001)],
            "large": [(2000, 3000)],
        }[case]
    return [Case(f"a {h}x{w} image", (random_image(h, w, seed=h * 10007 + w + (seed or 0)),)) for h, w in sizes]


CHANNELS = ("red", "green", "blue")
PLANES = ("x[i]", "x[i+n]", "x[i+2*n]")  # where a CHW kernel finds pixel i's red, green and blue
BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
# Weights students bring from elsewhere: (what they are, red, green, blue).
OTHER_WEIGHTS = (
    ("the weights 0.299, 0.587, 0.114 (BT.601 to three digits: the red one is 0.2989 here)", (0.299, 0.587, 0.114)),
    ("the textbook weights 0.3, 0.59, 0.11", (0.3, 0.59, 0.11)),
    ("the BT.709 (HDTV) weights 0.2126, 0.7152, 0.0722", (0.2126, 0.7152, 0.0722)),
    ("the plain average (r + g + b) / 3", (1 / 3, 1 / 3, 1 / 3)),
    ("integer weights 77, 150, 29 divided by 256 (fixed point), too coarse for these weights",
     (77 / 256, 150 / 256, 29 / 256)),
)


def grey_range(exact):
    """The lowest and highest grey value a right float32 kernel may store for exact grey values (GREY_SLACK either side)."""
    return (exact - GREY_SLACK).floor(), (exact + GREY_SLACK).floor()


def _explains(yours, exact):
    """Where yours is what truncating exact gives (within the float32 slack)."""
    lo, hi = grey_range(exact)
    return (yours == lo) | (yours == hi)


def _channels(x, idx, layout="chw"):
    """The red, green and blue values a kernel reads for the pixels at flat indices idx (None: all), as float64."""
    flat = x.reshape(-1)
    n = flat.numel() // 3
    if idx is None:
        return [(flat[c::3] if layout == "hwc" else flat[c * n:(c + 1) * n]).double() for c in range(3)]
    if layout == "hwc":
        return [flat[3 * idx + c].double() for c in range(3)]
    return [flat[c * n + idx].double() for c in range(3)]


def _mapping_words(m):
    wrong = [f"{WEIGHTS[c]:.4f} ({CHANNELS[c]}'s weight) multiplies {PLANES[m[c]]}, the {CHANNELS[m[c]]} value"
             for c in range(3) if m[c] != c]
    return "; ".join(wrong)


def _value_hints(yours, x, bad, valid=None):
    """What the wrong values match, as sentences: other weights, other channels, other places; [] when nothing fits.

    A guess is named only when it explains every pixel in valid (all of them by default), right ones included. Each
    guess is tried on a sample of pixels first (the wrong ones among them), so a 6-million-pixel image stays quick.
    """
    h, w = x.shape[1:]
    n = h * w
    y, wrong = yours.reshape(-1), bad.reshape(-1)
    if valid is not None and bool(valid.all()):
        valid = None
    pool = (wrong if valid is None else wrong & valid.reshape(-1)).nonzero().flatten()
    spread = torch.arange(0, n, max(1, n // 2000))
    sample = torch.cat([pool[:2000], spread if valid is None else spread[valid.reshape(-1)[spread]]])

    def matches(guess, lo=0, hi=n):
        """guess(idx) gives the exact grey values the mistake makes at flat indices idx (None: every pixel).

        Only pixels lo <= i < hi (and valid ones) are compared: a shifted guess has nothing to say at the edge.
        """
        some = sample[(sample >= lo) & (sample < hi)]
        if not len(some) or not bool(_explains(y[some], guess(some)).all()):
            return False
        if valid is None and (lo, hi) == (0, n):
            return bool(_explains(y, guess(None)).all())
        every = torch.arange(lo, hi)
        if valid is not None:
            every = every[valid.reshape(-1)[lo:hi]]
        return bool(_explains(y[every], guess(every)).all())

    def weighted(wts, order=(0, 1, 2), layout="chw"):
        return lambda idx: sum(wt * ch for wt, ch in zip(wts, (lambda c: [c[o] for o in order])(
            _channels(x, idx, layout))))

    found = []
    for words, wts in OTHER_WEIGHTS:
        if matches(weighted(wts)):
            found.append(f"your values match {words}; check the weights: the exercise's are "
                         "0.2989, 0.5870, 0.1140.")
    for c in range(3):
        if matches(lambda idx, c=c: _channels(x, idx)[c]):
            found.append(f"your values are the {CHANNELS[c]} values unchanged ({PLANES[c]}): the grey value is "
                         "0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n].")
    for m in itertools.product(range(3), repeat=3):
        if m != (0, 1, 2) and matches(weighted(WEIGHTS, m)):
            found.append(f"your values match the right weights on the wrong channels: {_mapping_words(m)}; "
                         "check the weights and the channel offsets: in CHW, red is x[i], green x[i+n] and "
                         "blue x[i+2*n] (n = h*w).")
    if n > 1 and matches(weighted(WEIGHTS, layout="hwc")):
        found.append("your values are what reading the channels interleaved gives (HWC: x[3*i], x[3*i+1], "
                     "x[3*i+2]), but the image is CHW, one whole plane per channel: red x[i], green x[i+n], "
                     "blue x[i+2*n] (n = h*w).")
    right = weighted(WEIGHTS)
    if h > 1 and w > 1 and matches(lambda j: right((torch.arange(n) if j is None else j) % h * w
                                                   + (torch.arange(n) if j is None else j) // h)):
        found.append("your values are right but stored column by column: pixel (row, col) went to "
                     "out[col*h + row]. The output is row-major: pixel (row, col) is out[row*w + col].")
    for s in (1, -1, 2, -2, 3, -3):
        if abs(s) < n and matches(lambda j, s=s: right(j - s), max(0, s), min(n, n + s)):
            found.append(f"your values are right but {abs(s)} pixel{'s' if abs(s) > 1 else ''} "
                         f"{'after' if s > 0 else 'before'} where they belong: pixel i's grey value went to "
                         f"out[i{s:+d}]. Write out[i] from x[i], x[i+n] and x[i+2*n].")
            break
    if not found:
        high = (x.reshape(3, -1) > 127).any(0)
        if bool(high[wrong].all()) and bool(high.any()) and not bool(high.all()):
            found.append("every wrong pixel has a channel above 127 and every pixel whose channels are all "
                         "below 128 is right: the kernel reads the channels as signed char (-128 to 127). "
                         "Use unsigned char* (uint8 holds 0 to 255).")
    return found


def _ordinal(p):
    return {2: "second", 3: "third"}.get(p, f"{p}th")


def _unwritten_hint(missing, maybe, h, w, words):
    """What the positions of the never-written pixels say: a small grid, a shifted or gappy index, nothing written.

    missing: the wrong pixels that hold the fill value; maybe: every pixel that holds it (a right pixel may be
    171 too); both flat. A pattern is named only when it holds every missing pixel and only pixels in maybe.
    words: the rung's (Rung.words): its index, grid and store, so a Triton answer reads Triton.
    """
    n = missing.numel()
    idx = missing.nonzero().flatten()
    count = len(idx)
    every = torch.arange(n)

    def fits(pattern):
        return bool(pattern[missing].all()) and bool(maybe[pattern].all())

    lane, group, groups, grid, floor = (words[k] for k in ("lane", "group", "groups", "grid", "floor"))
    cover = f" Each pixel needs a {lane} of its own, together covering 0 to n-1: {words['index']}."
    if bool(maybe.all()):
        small = (f" A {h}x{w} image has fewer pixels than a {group} of 1024: if you compute {groups} as {floor}, "
                 f"that is 0 {groups}; {grid} rounds up." if n < 1024 else "")
        return (f"no pixel was written. The pixels must be stored into the tensor you return: {words['store']} "
                "(a value a kernel returns is thrown away)." + small)
    held = (~maybe).nonzero().flatten()  # pixels certainly written
    start, end = int(held[-1]) + 1, int(held[0])  # the unwritten tail starts at start; the head ends before end
    if start < n and fits(every >= start):
        causes = []
        unscaled = [t for t in BLOCK_SIZES if n > t and start == -(-n // t) + t - 1]
        if unscaled:  # cdiv(n, t) groups whose offsets step by 1, not t: group p covers p to p + t - 1
            t = unscaled[0]
            groups_ = -(-n // t)
            causes.append(f"{groups_} {groups} of {t} {lane}s (as many as {grid} gives) whose first {lane}s sit 1 "
                          f"apart instead of {t}: {group} p covers pixels p to p + {t - 1}, so together they reach "
                          f"only pixel {start - 1}. The {group}'s number must be scaled by its size: {words['index']}")
        if any(start == n // t * t for t in BLOCK_SIZES):
            causes.append(f"{floor} {groups}, which rounds down ({grid} rounds up)")
        if start in BLOCK_SIZES:
            causes.append(f"an index that leaves out the {group}'s offset ({words['index']})")
        if not causes:
            causes.append(f"too few {groups} for this image: compute them from its size, {groups} = {grid}, and "
                          f"give each {group} its own pixels ({words['index']})")
        return (f"only the first {start:,} of {n:,} pixels got a {lane}: the last {n - start:,} (from "
                f"{_rowcol(start, w)} on) were never written. That fits " + ", or ".join(causes) + ".")
    if end > 0 and fits(every < end):
        first_ones = f"the first {end:,} pixels were" if end > 1 else "pixel 0 was"
        return (f"{first_ones} never written and every other pixel is right: does your index start past 0? "
                f"{words['first'][0].upper()}{words['first'][1:]} must get pixel 0: {words['index']}, nothing added.")
    for p in range(2, 9):
        if bool((idx % p != 0).all()) and fits(every % p != 0):
            return (f"only every {_ordinal(p)} pixel (0, {p}, {2 * p}, ...) was written: your index spreads the "
                    f"{lane}s {p} pixels apart." + cover)
    c = int((idx % w).min())
    if h > 1 and c > 0 and fits(every % w >= c):
        return (f"every column from col {c} on was never written: the grid covers {c} of {w} columns "
                f"across ({words['columns']}).")
    return (f"{count:,} pixels scattered through the image were never written (flat indices {_listed(idx)}; "
            f"pixel i is row i // w, col i % w): your index skips pixels, so they get no {lane}." + cover)


def _rowcol(i, w):
    return f"pixel {i:,}, row {i // w}, col {i % w}"


def _listed(idx, limit=6):
    return ", ".join(f"{int(i):,}" for i in idx[:limit]) + (", ..." if len(idx) > limit else "")


def _unnamed(yours, x, lo, bad):
    """The honest hint when no known mistake explains the wrong values: what they look like, and what to try."""
    idx, _ = first(bad)
    r, g, b = (int(c) for c in x[(slice(None), *idx)])
    want = int(lo[tuple(idx)])
    diff = (yours - lo)[bad]
    most = int(diff.abs().max())
    off = "by 1" if most == 1 else f"by {int(diff.abs().min())} to {most}"
    side = ("all too high" if bool((diff > 0).all()) else "all too low" if bool((diff < 0).all())
            else f"{int((diff > 0).sum()):,} too high and {int((diff < 0).sum()):,} too low")
    return (f"the values are wrong in a way the checker cannot name: the wrong pixels are off {off}, {side}. "
            f"Next step: run your function on that one pixel, torch.tensor([[[{r}]], [[{g}]], [[{b}]]], "
            f"dtype=torch.uint8), and print each term of the sum; the grey value must be {want} "
            "(0.2989*r + 0.5870*g + 0.1140*b, truncated).")


def judge_grey(yours, case, what, unwritten=None):
    """Asserts yours is the grayscale of the case's image: uint8, (H, W), each pixel the truncated weighted sum.

    A failure's hint comes from what the wrong pixels show (the fill value, where they are, what their values
    match), and says plainly when they show nothing the checker can name.
    """
    x, where, words = case.args[0], case.where, {**CUDA.words, **case.words}
    h, w = x.shape[1:]
    expect_tensor(yours, what, where, (h, w), torch.uint8, {
        "return": ", e.g. `return res.view(h, w)`",
        "shape": "the output has one value per pixel: view it as (h, w).",
        "dtype": f"create the output with the input's dtype ({words['dtype']})."})
    yours = yours.cpu().to(torch.int16)
    exact = rgb2grey_exact(x)
    lo, hi = grey_range(exact)
    bad = (yours != lo) & (yours != hi)
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    idx, at = first(bad)
    mine, want, ex = int(yours[tuple(idx)]), int(exact[tuple(idx)].floor()), float(exact[tuple(idx)])  # lo is -1 for black
    r, g, b = (int(c) for c in x[(slice(None), *idx)])
    msg = (f"{what}: {n_bad:,} of {h * w:,} pixels are wrong for {where}.\n"
           f"  first at {at}: yours {mine}, expected {want} "
           f"(r={r}, g={g}, b={b}: 0.2989*r + 0.5870*g + 0.1140*b = {ex:.4f}, truncated to {want})")
    missing = bad & unwritten.cpu() if unwritten is not None else torch.zeros_like(bad)
    never = int(missing.sum())
    wrong_values = yours[bad]
    if never and never <= 2 * sum(int((wrong_values == v).sum()) for v in (169, 170, 172, 173)) / 4:
        never, missing = 0, torch.zeros_like(bad)  # 171 no commoner than its neighbours: chance, not evidence
    frac = exact - exact.floor()
    rounded_up = (yours - lo == 1) & (frac >= 0.5 - GREY_SLACK)
    found = [] if never == n_bad else _value_hints(yours, x, bad)
    if found:
        never = 0  # a mistake that explains every pixel, those that hold 171 too: they were written
    elif never:
        msg += (f"\n  {never:,} of the wrong pixels still hold 171, the value the memory had "
                "before your code ran: they were probably never written.")
    if never == n_bad:
        hint = _unwritten_hint(missing.reshape(-1), unwritten.cpu().reshape(-1), h, w, words)
    elif not found and bool(rounded_up[bad].all()) and n_bad >= 0.9 * int((frac >= 0.5 + GREY_SLACK).sum()):
        hint = ("every wrong pixel is one too high where the exact value's fraction is 0.5 or more: "
                "that is rounding. A grey value is truncated (converting to uint8 drops the fraction).")
    else:
        if never:
            found = _value_hints(yours, x, bad & ~missing, ~missing)
        if len(found) > 1:
            found = [f"the pixels of {where} fit more than one mistake, so the checker cannot tell which: "
                     + " ".join(f"({k}) {f}" for k, f in enumerate(found, 1))]
        hint = found[0] if found else _unnamed(yours, x, lo, bad & ~missing)
        if never:
            hint += (f" Besides, {never:,} wrong pixel{'s' if never > 1 else ''} still hold 171 (flat indices "
                     f"{_listed(missing.reshape(-1).nonzero().flatten())}): never written, unless your code "
                     "wrote 171 there.")
    raise wrong_elements(f"{msg}\nHint: {hint}", bad)


SPEED_SIZE = {False: (4096, 4096), True: (300, 400)}  # the speed test's image: 67 MB of traffic, past any L2; CPU mode's


def speed_image(gen, device, small):
    """The speed test's input for one call: a fresh random image, made on the device from gen."""
    h, w = SPEED_SIZE[small]
    return (torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=gen, device=device),)


def grey_agrees(yours, args):
    """Whether yours is the grey image of args' image by judge_grey's rule, computed where the tensors are."""
    x = args[0]
    if tuple(yours.shape) != tuple(x.shape[1:]) or yours.dtype != torch.uint8:
        return False
    lo, hi = grey_range(rgb2grey_exact(x))
    mine = yours.to(torch.int16)
    return bool(((mine == lo) | (mine == hi)).all())


RGB2GREY = Exercise(
    name="rgb2grey", topic=__name__, cases=grey_cases, judge=judge_grey, out_dtype=torch.uint8,
    case_names={"python": ("tiny", "ragged", "tall_wide", "photo", "random"),
                "cuda": ("tiny", "ragged", "tall_wide", "photo", "large", "random"),
                "modes": ("memory", "integrity", "speed"),
                "triton": ("tiny", "ragged", "tall_wide", "photo", "random")},
    out_numel=lambda case: case.args[0][0].numel(),
    edges=("tiny", "tall_wide"),  # a 1x1 image leaves 255 of a 256-lane program past the end (issue 38)
    bindings={"cuda": Binding("rgb_to_grayscale", CPP_SRC),
              "triton": Launch("rgb2grey_triton", "a program's lanes past the last pixel must touch nothing: compute "
                               "mask = offs < n and pass it to every tl.load and tl.store (mask=mask), so only "
                               "0 <= offs < n is read and written (x up to 3*n - 1).")},
    hints={"memory": "a thread past the last pixel must do nothing: guard the body with `if (i < n)`, "
                     "and index only 0 <= i < n (x up to 3*n - 1).",
           "computes": "every pixel"},
    one_thread={"element": ("pixel", "pixels")},
    speed={"cuda": Speed(reference=CUDA_SRC, inputs=speed_image, agrees=grey_agrees,
                         where=lambda small: "a {}x{} image".format(*SPEED_SIZE[small]))})


@judges(PYTHON)
def check_rgb2grey(fn, case="photo", seed=None):
    """Checks a Python-rung grayscale function against the reference on one case of inputs."""
    check_python(RGB2GREY, fn, case, seed)


@judges(CUDA)
def check_rgb2grey_cuda(answer, case="photo", func="rgb_to_grayscale", seed=None):
    """Checks a compiled rgb_to_grayscale (your cuda_src, or the module load_cuda built) on one case: an input case,
    "memory" or "integrity"; "speed" times it against the course's kernel and returns the share of the points."""
    if func != binding(RGB2GREY).func:
        raise ValueError(f"the grayscale exercise's function is {binding(RGB2GREY).func}, not {func!r}")
    return check_cuda(RGB2GREY, answer, case, seed)


@judges(TRITON)
def check_rgb2grey_triton(fn, case="photo", seed=None):
    """Checks a launch function of a @triton.jit grayscale kernel on one case: an input case, "memory" or "integrity"."""
    check_triton(RGB2GREY, fn, case, seed)

"""printf in a kernel (drills/07): the check runs your grayscale kernel in a fresh process and reads the lines it printed.

The exercise's kernel prints `i=<index> grey=<value>` for its first five pixels. The lines are judged on what
they say (which indices, each once, and pixel i's grey value), not on their order: on a GPU the threads of a
warp print in thread order, but warps and blocks in any order.
"""
import os
import re
import tempfile

import torch

from ..harness.cuda import compiled
from ..harness.exercise import Case, judges, require_case
from ..harness.rungs import CUDA
from ..images import photo
from ..processes import run_in_child
from .grayscale import RGB2GREY, grey_range, rgb2grey_exact

__all__ = ("check_printf_cuda",)

FIRST = 5  # the exercise prints pixels i < 5
LINE = re.compile(r"\bi\s*[=:]\s*(-?\d+)[^\d\n-]+?(-?\d+(?:\.\d+)?)")

_CHILD = """
import torch
from course.toolchain.load import import_compiled
from course.device import device, synchronize
module = import_compiled(path)
x = torch.load(image, weights_only=True).to(device())
grey = getattr(module, func)(x)
synchronize()
"""


def printf_cases(case):
    """The image of a printf case, as a Case."""
    if case == "photo":
        img = photo()
        return Case(f"the photo ({img.shape[1]}x{img.shape[2]})", (img,))
    g = torch.Generator().manual_seed(3)
    return Case("a 1x3 image (three pixels, fewer than five)",
                (torch.randint(0, 256, (3, 1, 3), dtype=torch.uint8, generator=g),))


def judge_lines(lines, img, where):
    """Asserts the printed lines name pixels 0 to min(5, n)-1 once each, with their grey values."""
    n = img[0].numel()
    want = list(range(min(FIRST, n)))
    lows, highs = grey_range(rgb2grey_exact(img).reshape(-1))
    found = [(int(m.group(1)), float(m.group(2)), m.group(2)) for m in map(LINE.search, lines) if m]
    shown = "\n".join(f"    {ln}" for ln in lines[:8]) + ("\n    ..." if len(lines) > 8 else "")
    if not found:
        hint = ("nothing at all reached stdout: call printf inside the kernel, in `if (i < 5)`"
                if not lines else "print each line as printf(\"i=%d grey=%d\\n\", i, value)")
        raise AssertionError(f"your kernel printed no line of the form `i=<index> grey=<value>` for {where}"
                             + (f"; it printed:\n{shown}" if lines else "") + f"\nHint: {hint}.")
    indices = sorted(i for i, _, _ in found)
    if indices != want:
        extra = sorted(set(indices) - set(want))
        twice = sorted({i for i in indices if indices.count(i) > 1})
        if extra and min(extra) >= n:
            hint = (f"threads past the last pixel printed (i = {', '.join(map(str, extra))}; the image has {n}): "
                    "print only where i < n too, `if (i < n && i < 5)`, and read nothing past the end")
        elif extra == [FIRST]:
            hint = "six lines, i = 0 to 5: the test lets i = 5 through (`i <= 5`); print while i < 5"
        elif twice:
            hint = f"pixels {', '.join(map(str, twice))} printed more than once: print once a thread, not in a loop"
        elif extra:
            hint = (f"indices {', '.join(map(str, extra))} are not among the first {FIRST} pixels: print i, the "
                    "pixel's index blockIdx.x*blockDim.x + threadIdx.x, and only where i < 5")
        else:
            hint = (f"pixels {', '.join(map(str, sorted(set(want) - set(indices))))} printed nothing: every thread "
                    f"with i < {FIRST} (and i < n) prints one line")
        raise AssertionError(f"your kernel printed the indices {indices} for {where}; expected {want}, each once.\n"
                             f"  it printed:\n{shown}\nHint: {hint}.")
    for i, value, text in sorted(found):
        lo, hi = int(lows[i]), int(highs[i])
        if value in (lo, hi):
            continue
        r, g, b = (int(img.reshape(3, -1)[c, i]) for c in range(3))
        if "." in text and value == int(value):  # %f given a whole number: what it prints is not that number
            why = (f"grey={text} has a decimal point, so it was printed with %f, which expects a float (a double); "
                   "an unsigned char reaches printf as an int, and %f then prints whatever is in a float register, "
                   "not your value. Print the grey value with %d")
        elif value in (r, g, b):
            channel = ("red", "green", "blue")[(r, g, b).index(value)]
            why = f"that is pixel {i}'s {channel} value: print the grey value you stored"
        elif value != int(value):
            why = "a grey value is a whole number: print the unsigned char you store (%d), not a float"
        else:
            why = ("print the value this thread computed and stored for pixel i, after computing it (a %f for an int, "
                   "or out[i] read before it is written, prints garbage)")
        raise AssertionError(f"your kernel printed grey={value:g} for pixel {i} of {where}; its grey value is {lo} "
                             f"(r={r}, g={g}, b={b}).\n  it printed:\n{shown}\nHint: {why}.")


@judges(CUDA)
def check_printf_cuda(answer, case="photo"):
    """Runs your compiled rgb_to_grayscale in a fresh process on one case ("photo", "small") and judges the lines its kernel printed."""
    require_case(case, ("photo", "small"))
    path, func = compiled(RGB2GREY, answer)
    c = printf_cases(case)
    where, img = c.where, c.args[0]
    with tempfile.TemporaryDirectory(prefix="course-printf-") as tmp:
        image = os.path.join(tmp, "image.pt")
        torch.save(img, image)
        run = run_in_child(_CHILD, timeout=120, path=path, image=image, func=func)
    if not run.ok:
        raise AssertionError(f"running your function on {where} failed: {run.error}\nHint: the kernel must still "
                             "compute every pixel; print only from threads with i < 5 and i < n.") from None
    judge_lines(run.stdout.splitlines(), img, where)
    print(f"{func}: printf {case} passed")

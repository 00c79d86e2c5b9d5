"""Grayscale with the threads per block as a parameter (drills/04): every block size of the sweep must give the right pixels."""
import torch

from ..harness.cuda import Binding, check_cuda
from ..harness.exercise import Case, Exercise, judges
from ..harness.rungs import CUDA
from ..images import photo
from .grayscale import judge_grey, random_image

__all__ = ("check_grey_threads_cuda",)

CPP_SRC = "torch::Tensor rgb_to_grayscale(torch::Tensor input, int64_t threads);"
SWEEP = (32, 64, 128, 256, 512, 1024)  # threads per block: one warp to the most a block may hold


def threads_cases(case, seed, rung):
    """The named inputs of a sweep check: Cases of (image, threads per block)."""
    if case == "photo":
        img = photo()
        return [Case(f"the photo ({img.shape[1]}x{img.shape[2]}), {t} threads a block", (img, t)) for t in SWEEP]
    if case == "random":
        g = torch.Generator().manual_seed(seed)
        out = []
        for t in SWEEP:
            h, w = (int(v) for v in torch.randint(1, 700, (2,), generator=g))
            img = random_image(h, w, seed + h * 10007 + w)
            out.append(Case(f"a {h}x{w} image, {t} threads a block", (img, t)))
        return out
    sizes = {"tiny": [(1, 1)], "ragged": [(7, 37), (33, 31), (1, 2049)]}[case]
    return [Case(f"a {h}x{w} image, {t} threads a block", (random_image(h, w, seed=h * 10007 + w), t))
            for h, w in sizes for t in SWEEP]


GREY_THREADS = Exercise(
    name="rgb2grey_threads", topic=__name__, cases=threads_cases, judge=judge_grey, out_dtype=torch.uint8,
    case_names={"cuda": ("tiny", "ragged", "photo", "random"), "modes": ("memory", "integrity")},
    out_numel=lambda case: case.args[0][0].numel(), bindings={"cuda": Binding("rgb_to_grayscale", CPP_SRC)},
    edges=("tiny",),  # a 1x1 image leaves all but one thread of every block size past the end (issue 38)
    hints={"memory": "a thread past the last pixel must do nothing, whatever the block size: guard the body with "
                     "`if (i < n)`, and compute i from blockDim.x (not from a fixed 256).",
           "computes": "every pixel"})


@judges(CUDA)
def check_grey_threads_cuda(answer, case="ragged", seed=None):
    """Checks a compiled rgb_to_grayscale(input, threads) at every block size of the sweep, 32 to 1024, on one case."""
    check_cuda(GREY_THREADS, answer, case, seed)

"""The Python rungs' one-thread contract (course/harness/contract.py): right kernels of every runner keep it, and a
kernel whose output is right but whose threads do other threads' work, or vectorised work, fails naming the rule."""
import linecache

import pytest
import torch

import course
from course.harness.contract import picks, tiled_source
from course.topics.grayscale import RGB2GREY

RULE = "a kernel computes only its own"


def answer(source, name):
    """The function `name` of an answer's source, defined as a notebook cell defines it (its source readable)."""
    path = f"<answer {abs(hash(source))}>"
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    ns = {"torch": torch, **{k: getattr(course, k) for k in ("run_kernel", "blk_kernel", "blk_kernel2d",
                                                             "blk_kernel2d_shar", "dim3", "cdiv", "rgb2grey")}}
    exec(compile(source, path, "exec"), ns)
    return ns[name]


GREY_K = """
def rgb2grey_pyk(x):
    c, h, w = x.shape
    n = h * w
    res = torch.empty(n, dtype=x.dtype)
    run_kernel(rgb2grey_k, n, x.flatten(), res, n)
    return res.view(h, w)
"""
GREY_BK = """
def rgb2grey_pybk(x, threads=256, blocks=None):
    c, h, w = x.shape
    n = h * w
    res = torch.empty(n, dtype=x.dtype)
    blk_kernel(rgb2grey_bk, blocks or cdiv(n, threads), threads, x.flatten(), res, n)
    return res.view(h, w)
"""
MATMUL_2D = """
def matmul_2d(m, n):
    (h, k), w = m.shape, n.shape[1]
    out = torch.empty(h, w)
    tpb = dim3(16, 16)
    blk_kernel2d(matmul_bk, dim3(cdiv(w, 16), cdiv(h, 16)), tpb, m.flatten(), n.flatten(), out.flatten(), h, w, k)
    return out
"""
MATMUL_2D_SWAPPED = """
def matmul_2d(m, n):
    (h, k), w = m.shape, n.shape[1]
    out = torch.empty(h, w)
    blk_kernel2d(matmul_bk, dim3(cdiv(h, 16), cdiv(w, 16)), dim3(16, 16), m.flatten(), n.flatten(), out.flatten(), h, w, k)
    return out
"""


def test_the_picks_are_the_judges_the_same_for_a_case_and_other_for_another_seed():
    assert picks(RGB2GREY, "a 7x37 image", 5) == picks(RGB2GREY, "a 7x37 image", 5)
    assert picks(RGB2GREY, "a 7x37 image", 5) != picks(RGB2GREY, "a 7x37 image", 6)
    assert all(0 <= p < 1 for p in picks(RGB2GREY, "the photo", None))


@pytest.mark.parametrize("check, source, name, case", [
    ("check_rgb2grey", "def rgb2grey_k(i, x, out, n):\n    out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]\n"
     + GREY_K, "rgb2grey_pyk", "ragged"),
    ("check_rgb2grey", "def rgb2grey_bk(b, t, d, x, out, n):\n    i = b*d + t\n    if i < n:\n"
     "        out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]\n" + GREY_BK, "rgb2grey_pybk", "ragged"),
    # a grid-stride loop over fewer threads than pixels: thread i writes i, i + 64, ..., all its own index gives it
    ("check_rgb2grey", "def rgb2grey_bk(b, t, d, x, out, n):\n    i = b*d + t\n    while i < n:\n"
     "        out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]\n        i += 64\n"
     + GREY_BK.replace("blocks or cdiv(n, threads), threads", "2, 32"), "rgb2grey_pybk", "ragged"),
    ("check_matmul", "def matmul_k(i, j, a, b, c, k):\n    c[i, j] = sum(a[i, p] * b[p, j] for p in range(k))\n"
     "def matmul_pyk(a, b):\n    c = torch.empty(a.shape[0], b.shape[1])\n"
     "    run_kernel(matmul_k, (a.shape[0], b.shape[1]), a, b, c, a.shape[1])\n    return c\n", "matmul_pyk", "ragged"),
    ("check_matmul", "def matmul_bk(bi, ti, bd, m, n, out, h, w, k):\n    r, c = bi.y*bd.y + ti.y, bi.x*bd.x + ti.x\n"
     "    if r < h and c < w:\n        out[r*w + c] = sum(m[r*k + i] * n[i*w + c] for i in range(k))\n" + MATMUL_2D,
     "matmul_2d", "all_different"),
    # rows from x and columns from y, on a grid that covers the product that way: right, and each thread's own element
    ("check_matmul", "def matmul_bk(bi, ti, bd, m, n, out, h, w, k):\n    r, c = bi.x*bd.x + ti.x, bi.y*bd.y + ti.y\n"
     "    if r < h and c < w:\n        out[r*w + c] = sum(m[r*k + i] * n[i*w + c] for i in range(k))\n"
     + MATMUL_2D_SWAPPED, "matmul_2d", "all_different"),
    ("check_matmul_tiled", open("examples/matmul/alice/matmul_tiled_bk.py").read(), "matmul_tiled_py", "ragged"),
    ("check_row_sum", open("examples/drills/alice/drill2_rows_k.py").read(), "row_sum_pyk", "ragged"),
])
def test_right_kernels_of_every_runner_keep_the_rule(check, source, name, case, capsys):
    getattr(course, check)(answer(source, name), case)
    assert "passed" in capsys.readouterr().out


GREY_L1 = "def rgb2grey_k(i, x, out, n):\n"
OWN = "0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]"


@pytest.mark.parametrize("kernel, wrapper, name, said", [
    (GREY_L1 + "    if i == 0:\n        r, g, b = x.tensor[:n].float(), x.tensor[n:2*n].float(), x.tensor[2*n:].float()\n"
     "        out.tensor[:] = (0.2989*r + 0.5870*g + 0.1140*b).to(torch.uint8)\n", GREY_K, "rgb2grey_pyk",
     "thread i=0 of run_kernel ran a vectorised PyTorch operation (_to_copy, on 259 elements)"),
    (GREY_L1 + "    if i == 0:\n        out.tensor.copy_(rgb2grey(x.tensor.view(3, 1, n)).view(-1))\n", GREY_K,
     "rgb2grey_pyk", "thread i=0 of run_kernel called the course's rgb2grey()"),
    # no vectorised operation: one thread loops over every pixel, through the tensor's own indexing
    ("def rgb2grey_bk(b, t, d, x, out, n):\n    if b == 0 and t == 0:\n        for i in range(n):\n"
     f"            out[i] = {OWN}\n", GREY_BK, "rgb2grey_pybk", "thread 0 of block 0 of blk_kernel wrote 259 pixels"),
    # the work done by a thread nobody picks: the picked ones write nothing of their own
    (GREY_L1 + f"    if i == n // 2 + 1:\n        for i in range(n):\n            out[i] = {OWN}\n", GREY_K,
     "rgb2grey_pyk", "thread i=0 of run_kernel wrote nothing, run alone on fresh memory, though pixel 0 is its own"),
    # its own pixel and its neighbour's, both right
    (GREY_L1 + f"    out[i] = {OWN}\n    if i + 1 < n:\n        i += 1\n        out[i] = {OWN}\n", GREY_K, "rgb2grey_pyk",
     "thread i=0 of run_kernel wrote 2 pixels (0, 1)"),
])
def test_a_right_output_from_threads_that_break_the_rule_fails_naming_it(kernel, wrapper, name, said):
    with pytest.raises(AssertionError) as info:
        course.check_rgb2grey(answer(kernel + wrapper, name), "ragged")
    message = str(info.value)
    assert "gives the right output for a 7x37 image" in message and said in message and RULE + " pixel" in message


def test_a_tiled_kernel_whose_one_thread_stores_its_blocks_every_element_fails():
    source = open("examples/matmul/alice/matmul_tiled_bk.py").read().replace(
        "    if r < h and c < w:\n        out[r*w + c] = p\n",
        "    if tc == 0 and tr == 0:\n        for a in range(blockdim.y):\n            for b in range(blockdim.x):\n"
        "                rr, cc = blockidx.y*blockdim.y + a, blockidx.x*blockdim.x + b\n"
        "                if rr < h and cc < w:\n"
        "                    out[rr*w + cc] = sum(m[rr*k + i] * n[i*w + cc] for i in range(k))\n")
    with pytest.raises(AssertionError, match=r"one thread \(number 0\) of block \(x=0, y=0\) of blk_kernel2d_shar stored"):
        course.check_matmul_tiled(answer(source, "matmul_tiled_py"), "all_different")


def test_the_tiled_kernels_source_shows_its_tile_and_barrier_or_their_absence():
    right = open("examples/matmul/alice/matmul_tiled_bk.py").read()
    assert tiled_source(right, "matmul_tiled_py") == {"kernel": "matmul_tiled_bk", "stores": True, "syncs": True}
    untiled = open("tests/corpus/matmul/py_tiled_no_shared_memory/matmul_tiled_bk.py").read()
    assert tiled_source(untiled, "matmul_tiled_py") == {"kernel": "matmul_tiled_bk", "stores": False, "syncs": False}
    # a view of shared memory counts as shared memory; a launch in another cell than the kernel is found
    viewed = right.replace("ms, ns = shared[:tw*tw], shared[tw*tw:]", "tiles = shared.view(2, tw*tw)\n    ms, ns = tiles[0], tiles[1]")
    assert tiled_source(viewed.split("def matmul_tiled_py"), "matmul_tiled_py") is None  # the launcher cut in two
    cells = viewed.split("\ndef matmul_tiled_py")
    assert tiled_source([cells[0], "def matmul_tiled_py" + cells[1]], "matmul_tiled_py")["stores"]
    assert tiled_source("def matmul_tiled_py(m, n):\n    return m @ n\n", "matmul_tiled_py") is None

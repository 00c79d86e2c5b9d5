"""The student-mistake corpus for matmul and the drills (issue 26): what a student reads, pinned phrase by phrase.

The same pattern as tests/test_messages.py (grayscale): each mistake is a cell a student could write, run as the
notebook runs it, with the phrases its message must contain (the real fix, in the lesson's own names) and those
it must not (the wrong hints it gave before). The CUDA ones run in CPU mode where there is no GPU; where a GPU
shows something else, the entry says so (a tuple in `must` is a set of alternatives, one of which must appear).
"""
from dataclasses import dataclass

import pytest

from course import cuda_begin, has_gpu
from course.harness.evidence import guard_hint
from course.harness.rungs import PYTHON as PYTHON_RUNG
from tests.test_messages import ROOT, Mistake, expect, message_of, run_cell

pytestmark = [pytest.mark.xdist_group("messages"), pytest.mark.timeout(1800)]

PRELUDE = {
    "L0": "import torch\nfrom course import check_matmul\n",
    "L1": "import torch\nfrom course import check_matmul, run_kernel\n",
    "L2": "import torch\nfrom course import check_matmul, cdiv, dim3, blk_kernel2d\n",
    "tiled": "import torch\nfrom course import check_matmul_tiled, cdiv, dim3, blk_kernel2d_shar\n",
}

EXAMPLES = ROOT / "examples"


def alice(topic, exercise, var=None):
    """An example student's right solution cell (examples/<topic>/alice/), or with var its cuda_src (not built)."""
    text = (EXAMPLES / topic / "alice" / f"{exercise}.py").read_text()
    if var is None:
        return text
    ns = {"cuda_begin": cuda_begin, "load_cuda": lambda *args: None, "cpp_src": "", "tiled_cpp": ""}
    exec(text, ns)
    return ns[var]


L0_MATMUL, L2_CELL, TILED_CELL = alice("matmul", "matmul"), alice("matmul", "matmul_bk"), alice("matmul", "matmul_tiled_bk")
L1_WRAPPER = alice("matmul", "matmul_k")[alice("matmul", "matmul_k").index("\ndef matmul_pyk"):]


def patched(src, old, new):
    assert old in src, old
    return src.replace(old, new)


def l2(old, new):
    return patched(L2_CELL, old, new)


PYTHON = {
    # ---- the five that pointed the wrong way (issue 26) -------------------------------------------------------
    "l2_half_guard": Mistake(
        "L2", "`if r < h:` only: no bound on the column", l2("if r < h and c < w:", "if r < h:"),
        'check_matmul(matmul_2d, "ragged")',
        ("IndexError", "bounds r but not c", "`if r < h and c < w:`", "c = 7"),
        ("the guard is not the problem", "if i < n")),
    "l2_row_and_column_swapped": Mistake(
        "L2", "r from x and c from y, the launch as the lesson gives it",
        l2("r = blockidx.y*blockdim.y + threadidx.y\n    c = blockidx.x*blockdim.x + threadidx.x",
           "r = blockidx.x*blockdim.x + threadidx.x\n    c = blockidx.y*blockdim.y + threadidx.y"),
        'check_matmul(matmul_2d, "tall_skinny")',
        ("never written", "takes its row from x", "r = blockidx.y*blockdim.y + threadidx.y"),
        ("too small", "launch enough blocks")),
    "tiled_loads_without_bounds": Mistake(
        "tiled", "tile loads with no bound: ms[...] = m[r*k + idx + tc], ns[...] = n[(idx + tr)*w + c]",
        patched(patched(TILED_CELL, " if r < h and idx + tc < k else 0.0", ""), " if c < w and idx + tr < k else 0.0",
                ""),
        'check_matmul_tiled(matmul_tiled_py, "ragged")',
        ("IndexError", "loads a tile element with no bound", "load 0.0 outside", "every thread of the block must reach "
         "syncthreads()"), ("did you forget the guard", "if i < n")),

    # ---- hint wording from other lessons --------------------------------------------------------------------
    "l0_loop_stops_short_named_k": Mistake(
        "L0", "the loop over k runs range(ac - 1): every element misses its last product",
        patched(L0_MATMUL, "range(ac)", "range(ac - 1)"), 'check_matmul(matmul, "ragged")',
        ("stops one short", "the loop over k", "`for k in range(ac)`"), ("i < k", "Sum i")),
    "l0_whole_numbers": Mistake(
        "L0", "each product truncated with int(): every value a whole number",
        patched(L0_MATMUL, "+= a[i, k] * b[k, j]", "+= int(a[i, k] * b[k, j])"), 'check_matmul(matmul, "ragged")',
        ("whole number", "start the sum at 0.0"), ("Declare it float", "declare")),
    "l1_kernel_returns_its_sum": Mistake(
        "L1", "matmul_k returns the sum instead of storing c[i, j]",
        "def matmul_k(i, j, a, b, c, k):\n    s = 0.0\n    for p in range(k):\n        s += a[i, p] * b[p, j]\n"
        "    return s\n" + L1_WRAPPER, 'check_matmul(matmul_pyk, "ragged")',
        ("returned a value", "c[i, j] = ..."), ("out[i] = ...",)),
    "l1_adds_into_empty_output": Mistake(
        "L1", "c[i, j] += ... straight into torch.empty's memory: every element NaN, although every one was written",
        "def matmul_k(i, j, a, b, c, k):\n    for p in range(k):\n        c[i, j] += a[i, p] * b[p, j]\n" + L1_WRAPPER,
        'check_matmul(matmul_pyk, "ragged")',
        ("adds to the NaN that torch.empty left there", "starts at 0.0"), ("launch enough blocks", "grid")),
    "l2_no_guard": Mistake(
        "L2", "no guard at all", l2("    if r < h and c < w:\n", "    if True:\n"), 'check_matmul(matmul_2d, "tiny")',
        ("IndexError", "did you forget the guard", "`if r < h and c < w:`"), ("if i < n",)),
}


@pytest.mark.parametrize("key", sorted(PYTHON))
def test_a_python_matmul_mistake_gets_the_message_that_names_its_fix(key):
    mistake = PYTHON[key]
    ns = {"__name__": "__main__"}
    run_cell(ns, PRELUDE[mistake.rung], f"<{key}:prelude>")
    run_cell(ns, mistake.cell, f"<{key}:cell>")
    expect(message_of(ns, mistake, key), mistake)


# ---- CUDA: the memory check's hint, read from the source (no build) --------------------------------------------

NAIVE, TILED = alice("matmul", "matmul_cuda", "cuda_src"), alice("matmul", "matmul_tiled_cuda", "tiled_src")
TILED_UNBOUNDED = patched(patched(TILED, "r < h && idx + tc < k ? m[r*k + idx + tc] : 0.0f", "m[r*k + idx + tc]"),
                          "c < w && idx + tr < k ? n[(idx + tr)*w + c] : 0.0f", "n[(idx + tr)*w + c]")
TILED_ONE_SYNC = patched(TILED, "p += ms[tr][i] * ns[i][tc];\n        __syncthreads();", "p += ms[tr][i] * ns[i][tc];")
PRINTF = patched(alice("drills", "drill7_printf_cuda", "cuda_src"), 'printf("i=%d grey=%d\\n", i, grey)',
                 'printf("i=%d grey=%f\\n", i, grey)')


@pytest.mark.parametrize("src, must, must_not", [
    (TILED_UNBOUNDED, ("`ms[tr][tc] = m[r*k + idx + tc];` in matmul_ks loads a tile element with no bound",
                       "load 0 outside", "every thread of the block must reach __syncthreads()"),
     ("if (row < h && col < w)", "guards")),
    (patched(NAIVE, "    if (r >= h || c >= w) return;\n", ""), ("has no guard", "`if (r < h && c < w)`"),
     ("if (r < n)", "if (i < n)")),
    (patched(NAIVE, "if (r >= h || c >= w) return;", "if (r >= h) return;"), ("guards r but not c",
                                                                              "`if (r < h && c < w)`"), ("row",)),
], ids=["tiled_loads_without_bounds", "matmul_no_guard", "matmul_half_guard"])
def test_the_matmul_memory_hint_names_the_kernels_own_indices(src, must, must_not):
    hint = guard_hint(src)
    expect(hint, Mistake("L3", "", "", "", must, must_not))


@dataclass(frozen=True)
class CudaMistake:
    what: str
    source: str
    run: str          # the test cell's check, on cuda_src
    must: tuple
    must_not: tuple = ()
    cpu_only: str = None  # why a GPU shows another message (then it runs in CPU mode only)


CUDA = {
    "tiled_loads_without_bounds": CudaMistake(
        "tile loads with no bound: in CPU mode the 512 bytes past n hold the fill NaN, so every element comes out as"
        " NaN with the fill value's bits; it was written", TILED_UNBOUNDED, 'check_matmul_tiled_cuda(cuda_src, "ragged")',
        ("computed from a NaN read past a tensor's end", "Bound each tile load"), ("those elements were never written",),
        cpu_only="a GPU's reads past n find other memory (and a GPU's NaN arithmetic does not keep the fill's bits), "
                 "so the values are wrong in other ways or right"),
    "tiled_loads_without_bounds_memory": CudaMistake(
        "the same, its memory check", TILED_UNBOUNDED, 'check_matmul_tiled_cuda(cuda_src, "memory")',
        ("out-of-bounds", "loads a tile element with no bound", "load 0 outside"), ("if (row < h && col < w)",)),
    "tiled_missing_second_sync": CudaMistake(
        "no __syncthreads() after the products: in CPU mode the answer changes with the order of a block's warps",
        TILED_ONE_SYNC, 'check_matmul_tiled_cuda(cuda_src, "ragged")',
        ("elements are wrong", "race on shared memory", "__syncthreads()"), ("cannot name",),
        cpu_only="on the H200 the ragged sizes come out right (the race shows at 1024 and in the race cell)"),
    "printf_float_format_for_grey": CudaMistake(
        "printf(\"i=%d grey=%f\", i, grey) with grey an unsigned char", PRINTF, 'check_printf_cuda(cuda_src, "photo")',
        ("printed with %f", "Print the grey value with %d"), ("blue value", "red value", "green value")),
}


@pytest.mark.parametrize("key", sorted(CUDA))
def test_a_cuda_matmul_or_drill_mistake_gets_the_message_that_names_its_fix(key, monkeypatch):
    from course import check_matmul_tiled_cuda, check_printf_cuda
    mistake = CUDA[key]
    if mistake.cpu_only and has_gpu():
        pytest.skip(mistake.cpu_only)
    ns = {"__name__": "__main__", "cuda_src": mistake.source, "check_matmul_tiled_cuda": check_matmul_tiled_cuda,
          "check_printf_cuda": check_printf_cuda}
    run = Mistake("L3", mistake.what, "", mistake.run, mistake.must, mistake.must_not)
    expect(message_of(ns, run, key), run)


def test_every_students_hidden_sizes_reveal_a_missing_barrier():
    """bob's tiled kernel (no second syncthreads) is right wherever one tile does: every seed's hidden sizes catch it."""
    from course.topics.matmul import matmul_cases
    ns = {"__name__": "__main__"}
    run_cell(ns, PRELUDE["tiled"], "<prelude>")
    run_cell(ns, (EXAMPLES / "matmul" / "bob" / "matmul_tiled_bk.py").read_text(), "<bob>")
    for seed in range(12):
        shapes = [tuple(x.shape for x in c.args) for c in matmul_cases("random", seed, PYTHON_RUNG)]
        assert any(min(a[0], a[1], b[1]) > 16 for a, b in shapes), shapes
        with pytest.raises(AssertionError, match="elements are wrong"):
            ns["check_matmul_tiled"](ns["matmul_tiled_py"], "random", seed=seed)


def test_the_lessons_tiled_kernel_passes_integrity_and_one_without_shared_memory_fails_it():
    """The shared-memory evidence is the course's marker inside the launch's range: it must reach the judge."""
    from course import check_matmul_tiled_cuda
    from course.topics.matmul import TILED_SRC
    check_matmul_tiled_cuda(TILED_SRC, "integrity")
    loop = "for (int i = 0; i < tw; ++i) p += ms[tr][i] * ns[i][tc];"
    naive = TILED_SRC.replace(loop, "for (int i = 0; i < tw && idx + i < k; ++i) p += m[r*k + idx + i] * n[(idx + i)*w + c];"
                              ).replace("ms[tr][tc] = ", "if (0) ms[tr][tc] = ").replace("ns[tr][tc] = ", "if (0) ns[tr][tc] = ")
    with pytest.raises(AssertionError, match="did not use shared memory"):
        check_matmul_tiled_cuda(naive, "integrity")


# ---- Triton (06_triton): TF32, which CPU mode's interpreter cannot show, and masked loads without other= ----------
TRITON_CELL = alice("matmul", "matmul_triton")
IEEE = 'acc += tl.dot(a, b, input_precision="ieee")'


@pytest.mark.parametrize("call, tf32", [
    ("tl.dot(a, b)", True), ("tl.dot(a, b, acc)", True), ('tl.dot(a, b, acc, "tf32")', True),
    ("tl.dot(a, b, allow_tf32=True)", True), ('tl.dot(a, b, input_precision="ieee")', False),
    ("tl.dot(a, b, allow_tf32=False)", False), ('tl.dot(a, b, input_precision="tf32x3")', False),
    ("tl.dot(a, b, input_precision=PRECISION)", False)])
def test_the_source_says_which_tl_dot_leaves_tf32_on(call, tf32):
    from course.harness.evidence import tf32_dots
    assert tf32_dots(f"def k(a, b, acc, PRECISION):\n    c = {call}\n") == ([f"c = {call}"] if tf32 else [])


def test_only_masked_loads_in_a_loop_without_other_are_named():
    from course.harness.evidence import loads_without_other
    text = ("def k(p, n, K):\n    x = tl.load(p, mask=n)\n    for i in range(K):\n        y = tl.load(p + i, mask=n)\n"
            "        z = tl.load(p + i, mask=n, other=0.0)\n        u = tl.load(p + i)\n")
    assert loads_without_other(text) == ["y = tl.load(p + i, mask=n)"]


def _triton(text):
    from course.harness.triton import HEADER, Source
    return Source("matmul_triton", HEADER + text)


def _triton_message(text, case):
    from course import check_matmul_triton
    with pytest.raises(AssertionError) as caught:
        check_matmul_triton(_triton(text), case)
    return str(caught.value)


@pytest.mark.skipif(has_gpu(), reason="CPU mode's verdict: on a GPU the values show TF32")
def test_in_cpu_mode_a_tf32_dot_fails_from_its_source_and_names_ieee():
    message = _triton_message(TRITON_CELL.replace(IEEE, "acc += tl.dot(a, b)"), "ragged")
    assert "only because CPU mode's Triton interpreter multiplies in float32" in message
    assert 'input_precision="ieee"' in message and "`acc += tl.dot(a, b)`" in message


def test_tf32_inputs_are_named_from_the_values_as_a_gpu_computes_them():
    """TF32 as a tensor core reads it (the low 13 bits of each float32 ignored), computed by the kernel itself: the
    values alone must name input_precision="ieee" (the kernel's own tl.dot is "ieee", so the source says nothing)."""
    truncated = ("a = (a.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)\n        "
                 "b = (b.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)\n        " + IEEE)
    message = _triton_message(TRITON_CELL.replace(IEEE, truncated), "ragged")
    assert "what TF32 inputs give" in message and 'input_precision="ieee"' in message


@pytest.mark.skipif(has_gpu(), reason="on a GPU TF32's error hides which products are missing")
def test_a_wrong_answer_with_tf32_left_on_hears_of_both():
    short = TRITON_CELL.replace(IEEE, "acc += tl.dot(a, b)").replace("range(0, k, BK)", "range(0, k - BK, BK)")
    message = _triton_message(short, "ragged")
    assert "stops a tile early" in message and "Besides, `acc += tl.dot(a, b)` leaves TF32 on" in message


def test_a_masked_tile_load_without_other_fails_the_memory_check_only():
    from course import check_matmul_triton
    loose = TRITON_CELL.replace(", other=0.0", "")
    check_matmul_triton(_triton(loose), "ragged")
    assert "has a mask but no other=" in _triton_message(loose, "memory")

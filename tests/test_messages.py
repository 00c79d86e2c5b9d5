"""The student-mistake corpus: what a student reads after a realistic mistake, pinned phrase by phrase.

The grading corpus (tests/corpus/, tests/test_corpus.py) pins which tests each answer passes. This one pins
what the messages say: each mistake below is a cell a student could write, run as the notebook runs it
(the Python rungs through their checks or the lesson's demo cell; the CUDA rung through
check_rgb2grey_cuda, in CPU mode where there is no GPU), with the phrases its message must contain (the
real fix) and the phrases it must not (the wrong hints it once gave). A message that drifts back to a
wrong hint fails here. The first ones are those a new user met (issue 14); the rest are the grayscale
mistakes the checks can tell apart.

A phrase in `must` may be a tuple of alternatives: one of them must appear (for what the GPU and CPU
mode show differently).
"""
import linecache
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import torch

import course.harness.python as harness_python
from course import cuda_begin, has_gpu, load_cuda
from course.harness.wire import Run
from course.harness.evidence import guard_hint
from course.harness.exercise import Case
from course.harness.integrity import judge as judge_integrity
from course.harness.rungs import CUDA as CUDA_RUNG
from course.topics.grayscale import CPP_SRC, grey_cases, judge_grey, rgb2grey

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "grayscale"
SOURCE = ROOT / "source" / "grayscale"
pytestmark = [pytest.mark.xdist_group("messages"), pytest.mark.timeout(1800)]

# What each lesson has imported when the student's cell runs (the notebooks' first cells).
PRELUDE = {
    "L0": "import torch\nfrom course import small_photo, check_rgb2grey\n",
    "L1": "import torch\nfrom course import small_photo, check_rgb2grey, run_kernel\n",
    "L2": "import math\nimport torch\nfrom course import small_photo, check_rgb2grey, blk_kernel, cdiv\n",
}


@dataclass(frozen=True)
class Mistake:
    rung: str         # L0, L1, L2 (Python) or L3 (CUDA)
    what: str         # the mistake, as a student makes it
    cell: str         # the student's cell: the solution cell (L3: the cuda_src assignment)
    run: str          # what shows the message: a test cell's check, or the lesson's demo
    must: tuple       # phrases the message must contain (a tuple inside: one of those)
    must_not: tuple = ()  # the wrong hints it must not give
    seconds: int = None   # the Python check's time limit, for the hangs (2 s, not 60)


def _wrapper(kernel_call, make="torch.empty(n, dtype=x.dtype, device=x.device)"):
    return (f"    c, h, w = x.shape\n    n = h * w\n    x = x.flatten()\n    res = {make}\n"
            f"{kernel_call}    return res.view(h, w)\n")


L1_WRAPPER = "def rgb2grey_pyk(x):\n" + _wrapper("    run_kernel(rgb2grey_k, h*w, x, res, n)\n")
L2_WRAPPER = "def rgb2grey_pybk(x):\n" + _wrapper(
    "    threads = 256\n    blk_kernel(rgb2grey_bk, cdiv(n, threads), threads, x, res, n)\n")
L1_SUM = "0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]"


def l2(body, wrapper=L2_WRAPPER):
    return f"def rgb2grey_bk(blockidx, threadidx, blockdim, x, out, n):\n{body}\n" + wrapper


def corpus(name):
    """A solution cell of the grading corpus (tests/corpus/grayscale/<name>/)."""
    return next((CORPUS / name).glob("*.py")).read_text()


WEIGHTS_HINT = "check the weights"  # the old hint for anything wrong: it must not answer unwritten pixels

PYTHON = {
    # ---- what issue 14's user met -------------------------------------------------------------------------
    "k_returns_its_value": Mistake(
        "L1", "the kernel returns the grey value instead of writing out[i]",
        f"def rgb2grey_k(i, x, out, n):\n    return {L1_SUM}\n" + L1_WRAPPER,
        'check_rgb2grey(rgb2grey_pyk, "ragged")',
        ("never written", "returned a value", "out[i] = ..."), (WEIGHTS_HINT, "channel offsets")),
    "bk_index_threadidx_times_blockdim": Mistake(
        "L2", "i = threadidx*blockdim + blockidx: block and thread swapped in the index",
        l2(f"    i = threadidx*blockdim + blockidx\n    if i < n:\n        out[i] = {L1_SUM}"),
        'check_rgb2grey(rgb2grey_pybk, "ragged")',
        ("never written", "your index skips pixels", "blockidx*blockdim + threadidx"), (WEIGHTS_HINT,)),
    "k_loops_over_every_pixel": Mistake(
        "L1", "the kernel loops over every pixel itself (run_kernel already does)",
        "def rgb2grey_k(i, x, out, n):\n    for j in range(n):\n"
        "        out[j] = 0.2989*x[j] + 0.5870*x[j+n] + 0.1140*x[j+2*n]\n" + L1_WRAPPER,
        'check_rgb2grey(rgb2grey_pyk, "photo")',
        ("did not finish", "ran past the check's time limit", "loops over every element itself",
         "already call it once per element", "never ends"),
        ("check its condition and what it counts",), seconds=2),
    "bk_floor_blocks_1x1": Mistake(
        "L2", "n // threads blocks: 0 blocks for a 1x1 image",
        l2(f"    i = blockidx*blockdim + threadidx\n    if i < n:\n        out[i] = {L1_SUM}",
           L2_WRAPPER.replace("cdiv(n, threads)", "n // threads")),
        'check_rgb2grey(rgb2grey_pybk, "tiny")',
        ("ran no thread", "0 blocks", "cdiv(n, threads)"), ("empty image", WEIGHTS_HINT)),
    "bk_float_blocks_1x1": Mistake(
        "L2", "n / threads blocks: a float",
        l2(f"    i = blockidx*blockdim + threadidx\n    if i < n:\n        out[i] = {L1_SUM}",
           L2_WRAPPER.replace("cdiv(n, threads)", "n / threads")),
        'check_rgb2grey(rgb2grey_pybk, "tiny")',
        ("whole number", "cdiv"), ("empty image",)),
    "bk_guard_less_or_equal": Mistake(
        "L2", "guard `if i <= n:`",
        l2(f"    i = blockidx*blockdim + threadidx\n    if i <= n:\n        out[i] = {L1_SUM}"),
        'check_rgb2grey(rgb2grey_pybk, "ragged")',
        ("IndexError", "your guard lets i == n through", "if i < n:"), ("did you forget the guard",)),
    "k_output_passed_as_input_demo": Mistake(
        "L1", "the wrapper passes res before x: run_kernel(rgb2grey_k, h*w, res, x, n); the demo cell shows it",
        f"def rgb2grey_k(i, x, out, n):\n    out[i] = {L1_SUM}\n"
        + L1_WRAPPER.replace("h*w, x, res, n", "h*w, res, x, n"),
        "rgb2grey_pyk(small_photo())",
        ("IndexError", "not the tensor you meant", "order of its parameters (i, x, out, n)",
         "x (19,200 elements), out (57,600 elements)"),
        ("did you forget the guard",)),
    "bk_output_passed_as_input_demo": Mistake(
        "L2", "the wrapper passes res before x to blk_kernel; the demo cell shows it",
        l2(f"    i = blockidx*blockdim + threadidx\n    if i < n:\n        out[i] = {L1_SUM}",
           L2_WRAPPER.replace("threads, x, res, n", "threads, res, x, n")),
        "rgb2grey_pybk(small_photo())",
        ("guard `i < n` holds for this thread", "not the tensor you meant", "order of its parameters"),
        ("did you forget the guard",)),

    # ---- the other index mistakes ---------------------------------------------------------------------------
    "bk_no_guard": Mistake(
        "L2", "no guard (bob): the last block's threads index past the end",
        corpus("py_bk_no_guard"), 'check_rgb2grey(rgb2grey_pybk, "tiny")',
        ("IndexError", "did you forget the guard", "block 0, thread 1"), ("not the tensor you meant",)),
    "bk_read_before_guard": Mistake(
        "L2", "reads the blue value before the guard",
        l2("    i = blockidx*blockdim + threadidx\n    b = x[i+2*n]\n    if i < n:\n"
           "        out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*b"),
        'check_rgb2grey(rgb2grey_pybk, "ragged")',
        ("outside the guard", "b = x[i+2*n]"), ("did you forget the guard",)),
    "k_writes_next": Mistake(
        "L1", "writes out[i+1]: the only thread of a 1x1 image is already past the end",
        corpus("py_k_writes_next"), 'check_rgb2grey(rgb2grey_pyk, "tiny")',
        ("IndexError", "out[i+1]", "a guard would not help", "offset"), ("did you forget the guard",)),
    "k_times_three_n": Mistake(
        "L1", "run_kernel(rgb2grey_k, c*h*w, ...): three times too many threads",
        f"def rgb2grey_k(i, x, out, n):\n    out[i] = {L1_SUM}\n" + L1_WRAPPER.replace("h*w, x, res, n", "c*h*w, x, res, n"),
        'check_rgb2grey(rgb2grey_pyk, "tiny")',
        ("IndexError", "pass the number of elements as times"), ("did you forget the guard",)),
    "bk_while_instead_of_if": Mistake(
        "L2", "`while i < n:` instead of `if`: the first thread never stops",
        corpus("py_bk_while_loop"), 'check_rgb2grey(rgb2grey_pybk, "ragged")',
        ("did not finish", "ran past the check's time limit", "while i < n:", "never ends", "`if`, not `while`"),
        (WEIGHTS_HINT,), seconds=2),

    # ---- values: each wrong in its own way -----------------------------------------------------------------
    "py_red_weight_0299": Mistake(
        "L0", "red weight 0.299 (bob)", (ROOT / "examples/grayscale/bob/rgb2grey_py.py").read_text(),
        'check_rgb2grey(rgb2grey_py, "photo")', ("pixels are wrong", "check the weights", "0.299, 0.587, 0.114")),
    "py_green_blue_swapped": Mistake(
        "L0", "green and blue offsets swapped",
        (ROOT / "examples/grayscale/alice/rgb2grey_py.py").read_text().replace("x[i+n]", "x[i+@]")
        .replace("x[i+2*n]", "x[i+n]").replace("x[i+@]", "x[i+2*n]"),
        'check_rgb2grey(rgb2grey_py, "ragged")',
        ("wrong channels", "0.5870 (green's weight) multiplies x[i+2*n]", "check the weights and the channel offsets")),
    "py_rounds": Mistake(
        "L0", "rounds instead of truncating", corpus("py_rounds"), 'check_rgb2grey(rgb2grey_py, "ragged")',
        ("that is rounding",), (WEIGHTS_HINT,)),
    "k_interleaved": Mistake(
        "L1", "reads HWC-interleaved x[3*i], x[3*i+1], x[3*i+2]", corpus("py_k_interleaved"),
        'check_rgb2grey(rgb2grey_pyk, "ragged")', ("interleaved", "CHW"), (WEIGHTS_HINT,)),
    "py_transposed": Mistake(
        "L0", "writes pixel (row, col) to res[col*h + row]", corpus("py_transposed"),
        'check_rgb2grey(rgb2grey_py, "ragged")', ("column by column", "out[row*w + col]"), (WEIGHTS_HINT,)),
    "py_compares_instead_of_assigning": Mistake(
        "L0", "`res[i] == ...` instead of `res[i] = ...`: nothing is stored",
        (ROOT / "examples/grayscale/alice/rgb2grey_py.py").read_text().replace("res[i] = ", "res[i] == "),
        'check_rgb2grey(rgb2grey_py, "ragged")',
        ("never written", "nothing was stored into the tensor your function returns"), (WEIGHTS_HINT, "blocks")),
    "py_off_by_one_level": Mistake(
        "L0", "adds 1 to every grey value: a mistake no hint knows",
        (ROOT / "examples/grayscale/alice/rgb2grey_py.py").read_text().replace("x[i+2*n]", "x[i+2*n] + 1"),
        'check_rgb2grey(rgb2grey_py, "ragged")',
        ("cannot name", "Next step", "torch.tensor([[["), (WEIGHTS_HINT, "rounding", "never written")),
}


def run_cell(namespace, source, name):
    """Runs source as a notebook cell: registered with linecache as IPython does, so inspect can read it."""
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), namespace)


def message_of(namespace, mistake, key):
    """The message a student reads after running the mistake's check or demo cell."""
    try:
        run_cell(namespace, mistake.run, f"<{key}:run>")
    except Exception as e:  # noqa: B902 (what the cell shows)
        return f"{type(e).__name__}: {e}"
    pytest.fail(f"{key}: {mistake.run} raised nothing")


def expect(message, mistake):
    for phrase in mistake.must:
        choices = phrase if isinstance(phrase, tuple) else (phrase,)
        assert any(c in message for c in choices), f"missing {phrase!r} in:\n{message}"
    for phrase in mistake.must_not:
        assert phrase not in message, f"the wrong hint {phrase!r} in:\n{message}"


@pytest.mark.parametrize("key", sorted(PYTHON))
def test_a_python_rung_mistake_gets_the_message_that_names_its_fix(key, monkeypatch):
    mistake = PYTHON[key]
    if mistake.seconds:
        monkeypatch.setattr(harness_python, "PYTHON_TIMEOUT", mistake.seconds)
    ns = {"__name__": "__main__"}
    run_cell(ns, PRELUDE[mistake.rung], f"<{key}:prelude>")
    run_cell(ns, mistake.cell, f"<{key}:cell>")
    expect(message_of(ns, mistake, key), mistake)


def test_a_kernel_whose_source_cannot_be_read_still_gets_a_hint_that_guesses_nothing():
    from course import blk_kernel
    kernel = eval("lambda b, t, d, out, n: out.__setitem__(b*d + t, 1)")  # no source for inspect
    with pytest.raises(IndexError) as info:
        blk_kernel(kernel, 2, 4, torch.zeros(5), 5)
    message = str(info.value)
    assert "index 5" in message and "has 5 elements" in message and "block 1, thread 1" in message
    assert "did you forget" not in message and "not the tensor you meant" not in message


# ---- the CUDA rung, through check_rgb2grey_cuda (CPU mode where there is no GPU) --------------------------------

def cuda(name):
    """The cuda_src of a grading-corpus answer, or of an example student's ("alice", "bob")."""
    text = (corpus(name) if name not in ("alice", "bob")
            else (ROOT / "examples" / "grayscale" / name / "rgb_to_grayscale_cuda.py").read_text())
    ns = {"cuda_begin": cuda_begin, "cpp_src": CPP_SRC, "load_cuda": lambda *args: None}  # the source, not built
    exec(text, ns)
    return ns["cuda_src"]


def patched(src, old, new):
    assert old in src, old
    return src.replace(old, new)


@dataclass(frozen=True)
class CudaMistake:
    what: str
    source: str       # a key of the sources fixture: sources repeat, so each is built once
    case: str         # the check's case
    must: tuple
    must_not: tuple = ()


CUDA = {
    "floor_blocks_1x1": CudaMistake(
        "n / threads blocks (bob): 0 blocks for a 1x1 image", "bob", "tiny",
        ("impossible grid", "cdiv", "gives 0 blocks"), ("an empty image launches 0 blocks", "empty image")),
    "floor_blocks_ragged": CudaMistake(
        "n / threads blocks (bob): the last pixels of 7x37 get no thread", "bob", "ragged",
        ("never written", "only the first 256 of 259 pixels got a thread", "n / threads", "cdiv(n, threads)"),
        (WEIGHTS_HINT,)),
    "does_not_compile": CudaMistake(
        "a missing parenthesis: every check shows the compiler's message, none a NameError", "broken", "tiny",
        ("does not compile", "error"), ("NameError", "is not defined")),
    "does_not_compile_photo": CudaMistake(
        "the same source, the next check", "broken", "photo",
        ("does not compile", "error"), ("NameError", "is not defined")),
    "green_blue_swapped": CudaMistake(
        "green and blue weights swapped", "cuda_green_blue_swapped", "ragged",
        ("wrong channels", "0.5870 (green's weight) multiplies x[i+2*n]"), ("never written",)),
    "index_plus_one": CudaMistake(
        "i = blockIdx.x*blockDim.x + threadIdx.x + 1: pixel 0 never written", "cuda_index_plus_one", "ragged",
        ("never written", "does your index start past 0", "nothing added"), (WEIGHTS_HINT,)),
    "far_read": CudaMistake(
        "reads x[i + 2*n + 100000], far past the input: not a race", "far_read", "integrity",
        (("outside a tensor", "read of memory that holds nothing defined", "pixels are wrong"),),
        ("that is a race",)),
}


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def sources():
    alice = cuda("alice")
    return {
        "bob": cuda("bob"),
        "broken": patched(alice, "if (i < n)", "if (i < n"),
        "cuda_green_blue_swapped": cuda("cuda_green_blue_swapped"),
        "cuda_index_plus_one": cuda("cuda_index_plus_one"),
        "far_read": patched(alice, "0.1140f*x[i+2*n]", "0.1140f*x[i+2*n+100000]"),
        "alice": alice,
    }


@pytest.mark.parametrize("key", sorted(CUDA))
def test_a_cuda_mistake_gets_the_message_that_names_its_fix(key, sources):
    from course import check_rgb2grey_cuda
    mistake = CUDA[key]
    ns = {"__name__": "__main__", "cuda_src": sources[mistake.source], "check_rgb2grey_cuda": check_rgb2grey_cuda}
    run = Mistake("L3", mistake.what, "", f'check_rgb2grey_cuda(cuda_src, "{mistake.case}")',
                  mistake.must, mistake.must_not)
    expect(message_of(ns, run, key), run)


def test_a_module_built_from_an_earlier_source_is_refused_not_judged(sources):
    from course import check_rgb2grey_cuda
    module = load_cuda(sources["alice"], CPP_SRC, ["rgb_to_grayscale"])
    # the student edited cuda_src, the compile failed, `module` still holds the last good build
    ns = {"module": module, "cuda_src": sources["broken"], "check_rgb2grey_cuda": check_rgb2grey_cuda}
    mistake = Mistake("L3", "a stale module", "", 'check_rgb2grey_cuda(module, "tiny")',
                      ("built from an earlier cuda_src", "did not compile"), ("tiny passed",))
    expect(message_of(ns, mistake, "stale_module"), mistake)


def test_the_cuda_lesson_compiles_in_the_exercise_cell_and_its_checks_build_the_source():
    # Editing and compiling are one cell, and every check builds cuda_src: no check can judge a stale module.
    for folder in (SOURCE, ROOT / "release" / "grayscale"):
        nb = nbformat.read(folder / "04_L3_cuda.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        solution = next(i for i, c in enumerate(code) if c.metadata.get("nbgrader", {}).get("solution"))
        assert code[solution].source.rstrip().splitlines()[-1].startswith("module = load_cuda(cuda_src, cpp_src,")
        assert any(c.source.startswith("cpp_src = ") for c in code[:solution])
        assert not [c for c in code if "load_cuda(" in c.source and c is not code[solution]]
        tests = [c.source for c in code if c.metadata.get("nbgrader", {}).get("grade")
                 and not c.metadata["nbgrader"].get("solution")]
        calls = [line for t in tests for line in t.splitlines() if line.startswith("check_")]
        assert calls and all(line.startswith("check_rgb2grey_cuda(cuda_src, ") for line in calls), calls


def test_the_lessons_promise_nothing_that_is_not_there():
    text = {p.stem: "\n".join(c.source for c in nbformat.read(p, as_version=4).cells) for p in SOURCE.glob("*.ipynb")}
    assert not re.search(r"\b[Dd]rill", text["04_L3_cuda"])
    for early in ("01_L0_loop", "02_L1_run_kernel"):  # blocks are taught in L2
        assert "multiple of a block" not in text[early] and "multiple of the block" not in text[early]
    assert "0 of the photo's 307,200 pixels differ" in text["04_L3_cuda"]


# ---- the memory check's hint, from the kernel's source (course/harness/evidence.py: guard_hint) ---------------

KERNEL = cuda_begin + r"""
__global__ void k(unsigned char* x, unsigned char* out, int n) {
%s
}
"""


@pytest.mark.parametrize("body, must, must_not", [
    ("    int i = blockIdx.x*blockDim.x + threadIdx.x;\n    out[i] = x[i] + x[i+n];",
     ("has no guard", "if (i < n)"), ("lets i == n",)),
    ("    int i = blockIdx.x*blockDim.x + threadIdx.x;\n    if (i <= n) out[i] = x[i];",
     ("your guard `if (i <= n)`", "lets i == n through", "if (i < n)"), ("has no guard",)),
    ("    int i = blockIdx.x*blockDim.x + threadIdx.x;\n    if (i > n) return;\n    out[i] = x[i];",
     ("lets i == n through",), ("has no guard",)),
    ("    int i = blockIdx.x*blockDim.x + threadIdx.x;\n    if (i < n) out[i] = x[i+3*n];",
     ("is there (`if (i < n)`)", "every offset you add", "x[i+3*n]"), ("has no guard", "lets i == n")),
    ("    int i = threadIdx.x + blockDim.x*blockIdx.x;\n    if (i <= n - 1) out[i] = x[i];",
     ("is there",), ("lets i == n", "has no guard")),
    ("    int i = blockIdx.x*blockDim.x + threadIdx.x;\n    unsigned char r = x[i];\n    if (i >= n) return;\n"
     "    out[i] = r;", ("uses `x[i]` before its guard",), ("has no guard",)),
    ("    int col = blockIdx.x*blockDim.x + threadIdx.x;\n    int row = blockIdx.y*blockDim.y + threadIdx.y;\n"
     "    if (row < n) out[row*n + col] = x[row*n + col];", ("guards row but not col",), ("has no guard",)),
    ("    for (int i = blockIdx.x*blockDim.x + threadIdx.x; i < n; i += blockDim.x*gridDim.x) out[i] = x[i];",
     ("is there (`for (...; i < n; ...)`)",), ("has no guard", "lets i == n")),
], ids=["no_guard", "less_or_equal", "early_return_greater", "guard_right_offset_wrong", "minus_one_is_right",
        "read_before_the_guard", "2d_col_unguarded", "grid_stride_loop"])
def test_the_memory_checks_hint_reads_the_guard_from_the_source(body, must, must_not):
    hint = guard_hint(KERNEL % body)
    for phrase in must:
        assert phrase in hint, hint
    for phrase in must_not:
        assert phrase not in hint, hint


# A row reduction, a block per row (the instructor trial's rowmax2, issue 41): BODY loads and combines one row.
BLOCK_PER_ROW = cuda_begin + r"""
__global__ void rowmax_k(const float* x, float* out, int rows, int cols) {
    __shared__ float s[256];
    int row = blockIdx.x;
    int tid = threadIdx.x;
BODY
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (tid < stride) s[tid] = COMBINE;
        __syncthreads();
    }
    if (tid == 0) out[row] = s[0];
}
"""
STRIDED = "    float m = -INFINITY;\n    for (int j = tid; j < cols; j += blockDim.x) m = fmaxf(m, x[INDEX]);\n    s[tid] = m;"
# A thread per row, its bound named rows.
THREAD_PER_ROW = cuda_begin + r"""
__global__ void rowmax_k(const float* x, float* out, int rows, int cols) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
GUARD    {
        float m = x[i*cols];
        for (int j = 1; j < cols; ++j) m = fmaxf(m, x[i*cols + j]);
        out[i] = m;
    }
}
"""


@pytest.mark.parametrize("src, must, must_not", [
    (BLOCK_PER_ROW.replace("BODY", "    s[tid] = x[row*cols + tid];").replace("COMBINE", "fmaxf(s[tid], s[tid + stride])"),
     ("`s[tid] = x[row*cols + tid];` in rowmax_k loads an element into shared memory with no bound", "load -INFINITY "
      "outside", "s[tid] = IN_RANGE ? x[row*cols + tid] : -INFINITY;", "must reach __syncthreads()"),
     ("load 0", ": 0.0f", "tile")),
    (BLOCK_PER_ROW.replace("BODY", "    s[tid] = x[row*cols + tid];").replace("COMBINE", "s[tid] + s[tid + stride]"),
     ("load 0 outside (a sum's identity", "s[tid] = IN_RANGE ? x[row*cols + tid] : 0.0f;"), ("INFINITY",)),
    (BLOCK_PER_ROW.replace("BODY", STRIDED.replace("INDEX", "row + j*cols")).replace("COMBINE", "fmaxf(s[tid], s[tid + stride])"),
     ("the guard of rowmax_k is there (`for (...; j < cols; ...)`", "(rows, cols)", "x[row + j*cols]"),
     ("guards", "but not row", "(h, w", "cols, stride")),
    (THREAD_PER_ROW.replace("GUARD", ""), ("rowmax_k has no guard", "`if (i < rows)`", "`if (i >= rows) return;`"),
     ("i < n", "i >= n")),
    (THREAD_PER_ROW.replace("GUARD", "    if (i <= rows)\n"),
     ("your guard `if (i <= rows)` in rowmax_k lets i == rows through", "Compare with < (`if (i < rows)`)",
      "return when i >= rows"), ("i == n", "i < n)")),
    (THREAD_PER_ROW.replace("GUARD", "    float first = x[i*cols];\n    if (i >= rows) return;\n"),
     ("uses `x[i*cols]` before its guard", "after `if (i >= rows) return;`"), ("i >= n",)),
], ids=["row_max_load_unbounded", "row_sum_load_unbounded", "row_max_column_major", "row_max_no_guard",
        "row_max_less_or_equal", "row_max_read_before_guard"])
def test_a_row_reductions_memory_hint_speaks_its_own_reduction_and_names(src, must, must_not):
    """The memory hint of a row reduction names its own identity value, its own bound (rows) and no false cause."""
    expect(guard_hint(src), Mistake("L3", "", "", "", must, must_not))


def test_a_row_kernels_memory_check_names_its_own_bound_and_no_other():
    """The whole memory-check message of a thread-per-row kernel without a guard: its bound is rows, never `i < n`."""
    from course import check_row_max_cuda
    src = THREAD_PER_ROW.replace("GUARD", "") + r"""
torch::Tensor row_max(torch::Tensor x) {
    CHECK_INPUT(x);
    int h = x.size(0), w = x.size(1);
    auto out = torch::empty({h}, x.options());
    if (h > 0) {
        rowmax_k<<<cdiv(h, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), h, w);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""
    with pytest.raises(AssertionError) as info:
        check_row_max_cuda(src, "memory")
    expect(str(info.value), Mistake("L3", "", "", "", ("out-of-bounds", "rowmax_k has no guard", "`if (i < rows)`"),
                                    ("i < n", "i >= n")))


@pytest.mark.parametrize("answer, must", [
    ("cuda_missing_guard", "has no guard"), ("cuda_guard_off_by_one", "lets i == n through"),
    ("cuda_right_restrict_names", "`if (idx >= npix) return;`"), ("cuda_right_2d_grid", "`if (row < h && col < w)`")])
def test_the_memory_checks_hint_on_the_grading_corpus(answer, must):
    assert must in guard_hint(cuda(answer))


def test_a_source_without_a_kernel_gets_the_general_memory_hint():
    assert "guard the kernel's body with `if (i < n)`" in guard_hint(cuda_begin + "int f() { return 0; }")


# ---- judged outputs that need no build: what the CUDA checks pass the judge ---------------------------------

def test_nothing_written_on_a_1x1_image_names_the_0_block_grid():
    # n / threads blocks without C10_CUDA_KERNEL_LAUNCH_CHECK: the launch fails silently, the output keeps 171
    x = grey_cases("tiny", None, CUDA_RUNG)[0].args[0]
    out = torch.full((1, 1), 171, dtype=torch.uint8)
    with pytest.raises(AssertionError) as info:
        judge_grey(out, Case("a 1x1 image", (x,)), "rgb_to_grayscale", unwritten=out == 171)
    expect(str(info.value), Mistake("L3", "", "", "", ("no pixel was written", "0 blocks", "cdiv(n, threads)"),
                                    (WEIGHTS_HINT,)))


def test_chance_171s_in_a_wrong_image_are_not_called_unwritten():
    x = grey_cases("photo", None, CUDA_RUNG)[0].args[0]
    r, g, b = x.float()
    out = (0.2989 * r + 0.1140 * g + 0.5870 * b).to(torch.uint8)  # every pixel written, some happen to be 171
    assert bool((out == 171).any())
    with pytest.raises(AssertionError) as info:
        judge_grey(out, Case("the photo", (x,)), "rgb_to_grayscale", unwritten=out == 171)
    assert "wrong channels" in str(info.value) and "never written" not in str(info.value)


def test_two_runs_that_differ_name_both_causes_not_just_a_race():
    y = rgb2grey(grey_cases("tiny", None, CUDA_RUNG)[0].args[0])
    z = y.clone() + 1
    events = [("cpu", "aten::empty"), ("cpu", "cuda_cpu_launch::k")]
    with pytest.raises(AssertionError) as info:
        judge_integrity("rgb_to_grayscale", "a 1x1 image", Run(value=y, again=z, events=events), set())
    expect(str(info.value), Mistake("L3", "", "", "", ("either a race", "holds nothing defined",
                                                       "memory check tells the two apart"), ("that is a race",)))


def test_a_kernel_without_shared_memory_is_told_so_in_any_exercises_words():
    """needs_shared is any exercise's (a row reduction's too): its message speaks of no tile or naive kernel."""
    y = torch.zeros(37)
    events = [("cpu", "aten::empty"), ("cpu", "cuda_cpu_launch::row_max_kernel")]
    with pytest.raises(AssertionError) as info:
        judge_integrity("row_max", "a 37x53 matrix", Run(value=y, again=y.clone(), events=events), set(),
                        needs_shared=True, what_computes="every row's max")
    expect(str(info.value), Mistake("L3", "", "", "", (
        "row_max's kernel (row_max_kernel) did not use shared memory for a 37x53 matrix, and this exercise asks for it",
        "__shared__ array", "__syncthreads()", "then compute every row's max from that array"),
        ("tiled kernel", "the naive one", "from the tile;")))


@pytest.mark.skipif(has_gpu(), reason="the figures in the lesson's text are CPU mode's")
def test_the_lessons_fma_figures_are_what_cpu_mode_measures(sources):
    from course import photo
    img, ref = photo(), rgb2grey(photo())
    with_f = load_cuda(sources["alice"], CPP_SRC, ["rgb_to_grayscale"]).rgb_to_grayscale(img)
    double = patched(patched(patched(sources["alice"], "0.2989f", "0.2989"), "0.5870f", "0.5870"), "0.1140f", "0.1140")
    without_f = load_cuda(double, CPP_SRC, ["rgb_to_grayscale"]).rgb_to_grayscale(img)
    assert int((with_f != ref).sum()) == 0
    assert int((without_f != ref).sum()) == 4


# ---- matmul: the hint a wrong float32 product gets, on every shape the CUDA rung checks -----------------------

MATMUL_MISTAKES = {  # what the kernel computes, in float32 as a kernel would, and the phrase its hint must name
    "stored column by column": lambda a, b: (a @ b).t().contiguous().view(a.shape[0], b.shape[1]),
    "read m column by column": lambda a, b: a.reshape(-1).view(a.shape[1], a.shape[0]).t() @ b,
    "read n column by column": lambda a, b: a @ b.reshape(-1).view(b.shape[1], b.shape[0]).t(),
    "stops one short": lambda a, b: a[:, :-1] @ b[:-1],
}


@pytest.mark.parametrize("case", ["ragged", "tall_skinny", "all_different", "digits"])
@pytest.mark.parametrize("mistake", sorted(MATMUL_MISTAKES))
def test_a_matmul_mistake_is_named_on_every_shape_it_shows_on(case, mistake):
    from course.topics.matmul import bound, judge_matmul, matmul_cases
    for c in matmul_cases(case, None, CUDA_RUNG):
        a, b = c.args
        yours = MATMUL_MISTAKES[mistake](a, b) if a.shape[1] > 1 else a @ b
        if bool(((yours.double() - a.double() @ b.double()).abs() <= bound(a, b)).all()):
            continue  # this shape cannot show the mistake (one row or column, k = 1): a right answer
        with pytest.raises(AssertionError, match="elements are wrong") as info:
            judge_matmul(yours, c, "matmul")
        assert mistake in str(info.value), f"{c.where}: {info.value}"

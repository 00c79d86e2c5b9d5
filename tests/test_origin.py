"""Where a wrong element comes from (course/harness/origin.py, issue 26): facts, not guesses.

For the first wrong element a check states the thread that should have written it (blockIdx, threadIdx of the
student's own launch), whether any thread wrote it (two runs with different fills), and, where the course can
run that one thread alone (the Python rungs; CUDA in CPU mode), the values of its index variables and what it
wrote. Each mistake here is one whose facts differ from a right kernel's: a wrong one must show them.
"""
import re

import pytest
import torch

from course import blk_kernel, cdiv, check_matmul, check_rgb2grey, cuda_begin, has_gpu, run_kernel
from course.toolchain import cpu
from course.harness.origin import describe_cuda, owner

pytestmark = [pytest.mark.xdist_group("messages"), pytest.mark.timeout(1800)]


def message(check, *args):
    with pytest.raises(AssertionError) as info:
        check(*args)
    return str(info.value)


def facts_of(text):
    """The lines of facts in a verdict: between its description and its hint."""
    return text.split("\nHint: ")[0]


# ---- the mapping from an element to its thread ------------------------------------------------------------------

@pytest.mark.parametrize("element, shape, grid, block, want", [
    (0, (7, 37), (2, 1, 1), (256, 1, 1), ((0, 0, 0), (0, 0, 0))),
    (258, (7, 37), (2, 1, 1), (256, 1, 1), ((1, 0, 0), (2, 0, 0))),
    (258, (7, 37), (1, 1, 1), (256, 1, 1), None),                      # the grid is too small
    (3 * 37 + 20, (7, 37), (3, 1, 1), (16, 16, 1), ((1, 0, 0), (4, 3, 0))),  # row 3 from y, col 20 from x
    (6 * 37 + 36, (7, 37), (2, 1, 1), (16, 16, 1), None),              # col 36 past 2 blocks of 16 across
    (5, (10,), (2, 2, 1), (4, 4, 1), None),                            # a 2D launch over a 1D output: no mapping
])
def test_owner_is_the_lessons_index_inverted(element, shape, grid, block, want):
    assert owner(element, shape, grid, block) == want


def test_owner_follows_how_the_exercise_gives_its_threads_the_output():
    # a row-wise kernel: thread i has row i; an element of row 3 belongs to thread 3, whatever its column
    assert owner(3 * 37 + 20, (7, 37), (1, 1, 1), (256, 1, 1), work="row") == ((0, 0, 0), (3, 0, 0))
    assert owner(3 * 37 + 20, (7, 37), (1, 1, 1), (2, 1, 1), work="row") is None    # 2 threads for 7 rows
    assert owner(5, (256,), (4, 1, 1), (256, 1, 1), work="shared") is None          # a histogram's count
    facts = {"launch": ["hist_k", [4, 1, 1], [256, 1, 1]], "shape": [256],
             "values": [{"value": 3, "fill": False}, {"value": 3, "fill": False}]}
    assert describe_cuda(facts, 5, "shared") == ["a thread wrote 3 there (the same in two runs with different fills)."]
    facts = {"launch": ["row_k", [1, 1, 1], [256, 1, 1]], "shape": [7, 37]}
    assert "thread 3 of block 0 (blockIdx.x = 0, threadIdx.x = 0) should" not in describe_cuda(facts, 3 * 37, "row")[0]
    assert "thread 3 of block 0 (blockIdx.x = 0, threadIdx.x = 3) should write it (its row, 3: i = " in \
        describe_cuda(facts, 3 * 37 + 20, "row")[0]


def _row_exercise(work):
    from course.harness.exercise import Case, Exercise, wrong_elements
    from course.harness.rungs import PYTHON

    def cases(case, seed, rung):
        return [Case("a (20, 37) matrix", (torch.arange(20 * 37, dtype=torch.float32).view(20, 37),))]

    def judge(yours, case, what, never=None):
        bad = yours != case.args[0] * 2
        if bad.any():
            unwritten = never is not None and bool(never[bad].all())
            raise wrong_elements(f"{what}: {int(bad.sum())} elements are wrong" + (", never written" if unwritten
                                 else "") + "\nHint: the checker cannot name it.", bad)
    return Exercise(name="doubled_rows", topic=__name__, cases=cases, case_names={PYTHON.sizes: ("ragged",)},
                    judge=judge, out_dtype=torch.float32, out_numel=lambda case: case.args[0].numel(), work=work)


def test_a_block_per_row_kernel_is_told_the_block_of_its_row_never_a_thread():
    # a row max with a block per row (row = blockIdx.x, its threads striding over the columns): an element-wise
    # reading says "thread 3 of block 0" for row 3, which is false
    assert owner(3, (20,), (20, 1, 1), (256, 1, 1), work="block_row") == ((3, 0, 0), None)
    assert owner(3 * 37 + 20, (20, 37), (20, 1, 1), (128, 1, 1), work="block_row") == ((3, 0, 0), None)
    assert owner(3, (20,), (2, 1, 1), (256, 1, 1), work="block_row") is None        # 2 blocks for 20 rows
    assert owner(3, (20,), (20, 2, 1), (16, 16, 1), work="block_row") is None      # a 2D launch: no mapping
    facts = {"launch": ["row_max_k", [20, 1, 1], [256, 1, 1]], "shape": [20]}
    said = describe_cuda(facts, 3, "block_row")[0]
    assert "block 3 should write it (a block per row: row = blockIdx.x = 3" in said and "thread" not in said.split(
        "(")[0], said
    assert "thread 3 of block 0" in describe_cuda(facts, 3, "element")[0]  # what "element" would say
    few = describe_cuda({"launch": ["row_max_k", [2, 1, 1], [256, 1, 1]], "shape": [20]}, 7, "block_row")[0]
    assert "starts 2 blocks for 20 rows" in few and "`row += gridDim.x`" in few, few


def test_work_is_declared_per_rung_and_checked_when_the_topic_is_imported():
    ex = _row_exercise({"cuda": "block_row", "python": "row"})
    assert ex.work_on("cuda") == "block_row" and ex.work_on("python") == "row" and ex.work_on("triton") == "element"
    assert ex.threads_for(None, torch.empty(20, 37)) == 20                              # the Python rung: a row each
    assert ex.threads_for(None, torch.empty(20, 37), "cuda") is None                    # blocks, not threads
    with pytest.raises(ValueError, match="choose one of element, row, block_row, shared"):
        _row_exercise({"cuda": "block"})


def test_a_row_wise_kernel_is_told_about_its_rows_not_its_elements():
    from course.harness.python import check_python

    def k(blockidx, threadidx, blockdim, x, out, h, w):
        i = blockidx * blockdim + threadidx
        if i < h:
            for j in range(w - 1):  # one column short
                out[i * w + j] = x[i * w + j] * 2

    def doubled(x):
        h, w = x.shape
        out = torch.empty(h * w)
        blk_kernel(k, cdiv(h, 32), 32, x.flatten(), out, h, w)
        return out.view(h, w)
    # 32 threads for 20 rows is enough: what an element-wise reading says ("some got no thread") is false here
    told = message(check_python, _row_exercise("element"), doubled, "ragged")
    assert "so some got no thread" in told
    text = message(check_python, _row_exercise("row"), doubled, "ragged")
    assert "got no thread" not in text and "no thread has" not in text, text
    assert "thread 0 of block 0 (blockidx = 0, threadidx = 0) should write its row, row 0." in text, text
    assert re.search(r"run alone: .*\bi = 0, j = 35; it wrote out\[0\], out\[1\]", text), text

    def too_few(x):
        h, w = x.shape
        out = torch.empty(h * w)
        blk_kernel(k, h // 16, 16, x.flatten(), out, h, w)  # 16 threads for 20 rows
        return out.view(h, w)
    text = message(check_python, _row_exercise("row"), too_few, "ragged")
    assert "blk_kernel ran 16 threads (1 block of 16) for 20 rows, so some got no thread" in text, text


def test_an_element_that_still_holds_the_fill_is_said_to_once():
    from course.harness.exercise import Case, Exercise, unwritten, wrong_elements
    from course.harness.python import check_python
    from course.harness.rungs import PYTHON

    def judge(yours, case, what, never=None):  # as `course new` writes a judge
        bad = ~(yours == case.args[0] * 2)
        if bad.any():
            msg = f"{what}: {int(bad.sum())} elements are wrong."
            if never is not None and bool(never[bad].any()):
                msg += "\n  it still holds NaN, the value the memory had before your code ran: it was never written."
            raise wrong_elements(msg + "\nHint: every i needs a thread.", bad)
    exercise = Exercise(name="doubled", topic=__name__, judge=judge, out_dtype=torch.float32,
                        cases=lambda case, seed, rung: [Case("10 values", (torch.arange(10.0),))],
                        case_names={PYTHON.sizes: ("ragged",)}, out_numel=lambda case: 10)

    def k(i, x, out):
        if i > 0:  # element 0 is never written
            out[i] = x[i] * 2

    def doubled(x):
        out = torch.empty(10)
        run_kernel(k, 10, x, out)
        return out
    text = message(check_python, exercise, doubled, "ragged")
    assert text.count("still holds NaN") == 1, text
    assert "run_kernel's call with i = 0 should write it" in text, text


def test_the_facts_of_a_probe_are_stated_in_the_launchs_own_terms():
    facts = {"launch": ["rgb2grey_k", [2, 1, 1], [256, 1, 1]], "shape": [7, 37],
             "values": [{"value": 171, "fill": True}, {"value": 92, "fill": True}],
             "alone": {"vars": [["i", "1"]], "wrote": [1], "count": 1}}
    lines = describe_cuda(facts, 0)
    assert "rgb2grey_k<<<2, 256>>>, thread 0 of block 0 (blockIdx.x = 0, threadIdx.x = 0) should write it" in lines[0]
    assert lines[1].startswith("no thread wrote it")
    assert lines[2] == "that thread, run alone (CPU mode), had i = 1 and wrote element 1 of the output."
    facts["values"] = [{"value": 3.5, "fill": False}, {"value": 7.25, "fill": False}]
    assert "changed with what the memory held before (3.5, then 7.25)" in describe_cuda(facts, 0)[1]
    facts["values"] = [{"value": 12, "fill": False}, {"value": 12, "fill": False}]
    assert describe_cuda(facts, 0)[1].startswith("a thread wrote 12 there")
    facts["launch"] = ["rgb2grey_k", [1, 1, 1], [256, 1, 1]]
    assert "has no thread for it (256 threads)" in describe_cuda(facts, 258)[0]


# ---- the Python rungs: the thread replayed alone ----------------------------------------------------------------

def _grey_bk(index):
    ns = {}
    exec("def k(blockidx, threadidx, blockdim, x, out, n):\n"
         f"    i = {index}\n"
         "    if i < n:\n"
         "        out[i] = int(0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n])\n", ns)
    kernel = ns["k"]

    def grey(x):
        c, h, w = x.shape
        n = h * w
        out = torch.empty(n, dtype=torch.uint8)
        blk_kernel(kernel, cdiv(n, 256), 256, x.flatten(), out, n)
        return out.view(h, w)
    return grey


def test_a_python_kernel_whose_index_starts_at_1_shows_the_thread_and_where_it_wrote():
    text = facts_of(message(check_rgb2grey, _grey_bk("blockidx*blockdim + threadidx + 1"), "ragged"))
    assert "thread 0 of block 0 (blockidx = 0, threadidx = 0) should write it" in text
    assert "it still holds 171, what the memory held before the call: no thread wrote it" in text
    assert re.search(r"that thread, run alone: .*i = 1; it wrote out\[1\]\.", text)


def test_a_python_kernel_using_threadidx_alone_shows_what_block_1_computed():
    text = facts_of(message(check_rgb2grey, _grey_bk("threadidx"), "ragged"))
    assert "thread 0 of block 1 (blockidx = 1, threadidx = 0) should write it" in text
    assert re.search(r"run alone: .*i = 0; it wrote out\[0\]\.", text)


def test_a_run_kernel_too_short_says_no_thread_has_the_element():
    def k(i, x, out, n):
        out[i] = int(0.2989 * x[i] + 0.5870 * x[i + n] + 0.1140 * x[i + 2 * n])

    def grey(x):
        c, h, w = x.shape
        n = h * w
        out = torch.empty(n, dtype=torch.uint8)
        run_kernel(k, n - 3, x.flatten(), out, n)
        return out.view(h, w)
    text = facts_of(message(check_rgb2grey, grey, "ragged"))
    assert "no thread has it (run_kernel called it for 256 threads)" in text


def test_a_2d_python_kernel_with_row_and_column_swapped_shows_the_thread_writing_elsewhere():
    from tests.test_messages_matmul import PYTHON
    ns = {}
    exec("import torch\nfrom course import cdiv, dim3, blk_kernel2d\n" + PYTHON["l2_row_and_column_swapped"].cell, ns)
    text = facts_of(message(check_matmul, ns["matmul_2d"], "tall_skinny"))
    first = re.search(r"first at row (\d+), col (\d+)", text)
    r, c = int(first.group(1)), int(first.group(2))
    assert f"threadidx.x = {c % 16}, threadidx.y = {r % 16})" in text
    # the thread the lesson's index gives that element computes r from x: r = its column, c = its row
    assert re.search(rf"run alone: .*\br = {c}\b.*\bc = {r}\b", text)


# ---- CUDA: a probe in a child (CPU mode here; on a GPU the launch comes from the profiler) ------------------------

GREY = cuda_begin + r'''
__global__ void rgb2grey_k(const unsigned char* x, unsigned char* out, int n) {
    int i = INDEX;
    if (i < n) out[i] = 0.2989f*x[i] + 0.5870f*x[i+n] + 0.1140f*x[i+2*n];
}
torch::Tensor rgb_to_grayscale(torch::Tensor input) {
    CHECK_INPUT(input);
    int h = input.size(1), w = input.size(2);
    auto out = torch::empty({h, w}, input.options());
    int threads = 256;
    rgb2grey_k<<<BLOCKS, threads>>>(input.data_ptr<unsigned char>(), out.data_ptr<unsigned char>(), h*w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
'''


def test_a_cuda_kernel_whose_index_starts_at_1_is_shown_its_thread_and_what_that_thread_computed():
    from course import check_rgb2grey_cuda
    src = GREY.replace("INDEX", "blockIdx.x*blockDim.x + threadIdx.x + 1").replace("BLOCKS", "cdiv(h*w, threads)")
    text = facts_of(message(check_rgb2grey_cuda, src, "ragged"))
    assert "rgb2grey_k<<<2, 256>>>, thread 0 of block 0 (blockIdx.x = 0, threadIdx.x = 0) should write it" in text
    assert "no thread wrote it: it held what the memory held before the call, in two runs" in text
    if not has_gpu():
        assert "that thread, run alone (CPU mode), had i = 1 and wrote element 1 of the output." in text


def test_a_cuda_grid_that_is_too_small_has_no_thread_for_the_last_pixels():
    from course import check_rgb2grey_cuda
    src = GREY.replace("INDEX", "blockIdx.x*blockDim.x + threadIdx.x").replace("BLOCKS", "h*w / threads")
    text = facts_of(message(check_rgb2grey_cuda, src, "ragged"))
    assert "your launch rgb2grey_k<<<1, 256>>> has no thread for it (256 threads)" in text


def test_a_cuda_kernel_adding_into_its_output_is_shown_to_depend_on_the_memory_before():
    from course import check_rgb2grey_cuda
    src = (GREY.replace("INDEX", "blockIdx.x*blockDim.x + threadIdx.x").replace("BLOCKS", "cdiv(h*w, threads)")
           .replace("out[i] = 0.2989f", "out[i] += 0.2989f"))
    text = message(check_rgb2grey_cuda, src, "ragged")
    assert "a thread wrote it, but what it wrote changed with what the memory held before" in facts_of(text)
    # the value hints could not name it ("cannot name"); the facts prove it
    assert "Hint: what your kernel wrote depends on what the memory held before it ran" in text
    assert "cannot name" not in text


# ---- CPU mode's watch: which declarations are reported -----------------------------------------------------------

def test_cpu_mode_reports_the_index_variables_a_kernel_declares_and_nothing_else():
    src = ("__global__ void k(const float* x, float* out, int n) {\n"
           "    int i = blockIdx.x*blockDim.x + threadIdx.x;\n"
           "    int r = i / 7, c = i % 7;  // int z = threadIdx.x;\n"
           "    for (int j = threadIdx.x; j < n; j += 5) {}\n"
           "    const unsigned tc = threadIdx.x, tr = threadIdx.y;\n"
           "    float v = 0.5f * i; int q = 3; int a[4];\n"
           "    if (i < n) out[i] = x[i] + v;\n}\n"
           "torch::Tensor f(torch::Tensor x) { int i = 0; return x; }\n")
    out = cpu.translate(src)
    watched = re.findall(r'watch\("(\w+)"', out)
    assert watched == ["i", "r", "c", "tc", "tr"]
    assert out.count("\n") == src.count("\n")  # every line where it was: compiler messages keep their lines
    assert 'watch("i", i);  // int z' not in out and "int r = i / 7, c = i % 7; ::cuda_cpu" in out


@pytest.mark.skipif(not has_gpu(), reason="a GPU build runs only on a GPU (CPU mode's runtime notes its launches)")
def test_a_gpu_split_build_notes_its_launch_so_the_probe_needs_no_profiler():
    import ctypes

    from course import load_cuda
    from course.toolchain import build_report
    from course.harness.origin import _noted_launch
    from course.topics.grayscale import CPP_SRC
    src = GREY.replace("INDEX", "blockIdx.x*blockDim.x + threadIdx.x").replace("BLOCKS", "cdiv(h*w, threads)")
    module = load_cuda(src, CPP_SRC, ["rgb_to_grayscale"])
    assert build_report(module)["how"] == "split"
    module.rgb_to_grayscale(torch.zeros(3, 7, 37, dtype=torch.uint8, device="cuda"))
    assert _noted_launch(ctypes.CDLL(module.__file__)) == ["rgb2grey_k", [2, 1, 1], [256, 1, 1]]


def test_a_histograms_wrong_count_names_no_thread_as_its_owner():
    # every thread adds into the counts (Exercise.work "shared"): no count has a thread that should write it
    from course.topics.mechanical import check_histogram_cuda
    from tests.test_release import ROOT
    ns = {"cuda_begin": cuda_begin, "cpp_src": "", "load_cuda": lambda *args, **kwargs: None}
    exec((ROOT / "tests/corpus/drills/d9_hist_counts_uninitialised/drill9_histogram_cuda.py").read_text(), ns)
    text = message(check_histogram_cuda, ns["hist_src"], "small")
    assert "counts are wrong" in text and "no thread wrote it" in text, text
    assert "where it comes from" not in text and "should write it" not in text, text


# A row max, a block per row, its tree reduction without __syncthreads() (the instructor trial's rowmax2, issue 41).
ROW_MAX_NO_SYNC = cuda_begin + r"""
__global__ void row_max_kernel(const float* x, float* out, int h, int w) {
    __shared__ float s[256];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    float m = -INFINITY;
    for (int j = tid; j < w; j += blockDim.x) m = fmaxf(m, x[row*w + j]);
    s[tid] = m;
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (tid < stride) s[tid] = fmaxf(s[tid], s[tid + stride]);
    }
    if (tid == 0) out[row] = s[0];
}

torch::Tensor row_max(torch::Tensor x) {
    CHECK_INPUT(x);
    int h = x.size(0), w = x.size(1);
    auto out = torch::empty({h}, x.options());
    if (h > 0) {
        row_max_kernel<<<h, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), h, w);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""


@pytest.mark.skipif(has_gpu(), reason="CPU mode orders a block's warps itself; a GPU's order is its own")
def test_a_missing_syncthreads_gets_the_same_message_in_every_run_and_is_told_the_order_matters():
    """The n-th launch of a process runs in the n-th order: the message is the same each run, and the facts tell the
    order apart from the memory before."""
    from course import check_row_max_cuda
    texts = [message(check_row_max_cuda, ROW_MAX_NO_SYNC, "ragged") for _ in range(3)]
    assert texts[0] == texts[1] == texts[2], "\n\n".join(texts)
    text = texts[0]
    assert "a thread wrote" in text and "(the same in two runs with different fills)" in text, text
    assert "in CPU mode, what it wrote changed with the order the threads of a block ran in" in text, text
    assert "changed with what the memory held before" not in text, text
    assert "Hint: what your kernel wrote depends on the order its threads ran in" in text and "__syncthreads()" in text

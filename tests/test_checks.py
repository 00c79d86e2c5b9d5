"""The grayscale checks pass right answers and reject wrong ones, each with a reason a beginner can use."""
import os
import signal

import pytest
import torch

from course.device import GraderFault
from course import blk_kernel, cdiv, check_rgb2grey, check_rgb2grey_cuda, has_gpu, rgb2grey, run_kernel
from course.harness.wire import Run
from course.harness.children import _crashed, in_child
from course.harness.exercise import Case
from course.harness.integrity import judge as judge_integrity
from course.harness.integrity import kernels, torch_ops
from course.harness.python import call_quietly
from course.harness.rungs import CUDA, PYTHON
from course.topics.grayscale import RGB2GREY, grey_cases, judge_grey, random_image, rgb2grey_exact

CASES = ["tiny", "ragged", "tall_wide", "photo"]


def rgb2grey_py(x):
    c, h, w = x.shape
    n = h * w
    x = x.flatten()
    res = torch.empty(n, dtype=x.dtype, device=x.device)
    for i in range(n):
        res[i] = 0.2989 * x[i] + 0.5870 * x[i + n] + 0.1140 * x[i + 2 * n]
    return res.view(h, w)


def rgb2grey_k(i, x, out, n):
    out[i] = 0.2989 * x[i] + 0.5870 * x[i + n] + 0.1140 * x[i + 2 * n]


def rgb2grey_pyk(x):
    c, h, w = x.shape
    n = h * w
    x = x.flatten()
    res = torch.empty(n, dtype=x.dtype)
    run_kernel(rgb2grey_k, n, x, res, n)
    return res.view(h, w)


def make_pybk(kernel, grid=lambda n, t: cdiv(n, t), make=torch.zeros):
    def rgb2grey_pybk(x):
        c, h, w = x.shape
        n = h * w
        x = x.flatten()
        res = make(n, dtype=x.dtype)
        blk_kernel(kernel, grid(n, 256), 256, x, res, n)
        return res.view(h, w)
    return rgb2grey_pybk


def rgb2grey_bk(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx * blockdim + threadidx
    if i < n:
        out[i] = 0.2989 * x[i] + 0.5870 * x[i + n] + 0.1140 * x[i + 2 * n]


def no_guard_bk(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx * blockdim + threadidx
    out[i] = 0.2989 * x[i] + 0.5870 * x[i + n] + 0.1140 * x[i + 2 * n]


def vectorised(weights=(0.2989, 0.5870, 0.1140), order=(0, 1, 2), post=lambda v: v):
    def rgb2grey_vec(x):
        planes = x.float()
        v = sum(w * planes[c] for w, c in zip(weights, order))
        return post(v).to(torch.uint8)
    return rgb2grey_vec


# ---- right answers pass

@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fn", [rgb2grey_py, rgb2grey_pyk, make_pybk(rgb2grey_bk), rgb2grey], ids=lambda f: getattr(f, "__name__", ""))
def test_right_answers_pass(fn, case, capsys):
    check_rgb2grey(fn, case)
    assert capsys.readouterr().out.strip().endswith(f"{case} passed")


def test_float64_and_other_summation_order_pass():
    check_rgb2grey(vectorised(order=(0, 1, 2)), "photo")
    check_rgb2grey(lambda x: (0.1140 * x[2].double() + 0.5870 * x[1].double() + 0.2989 * x[0].double()).to(torch.uint8), "photo")


def whole_greys():
    """Every (r, g, b) but black whose exact grey value is a whole number, as a (3, n) uint8 tensor: the weights have
    four decimals, so 0.2989*r + 0.5870*g + 0.1140*b is whole where 10,000 divides 2989*r + 5870*g + 1140*b."""
    v = torch.arange(256)
    g, b = torch.meshgrid(v, v, indexing="ij")
    found = [torch.stack([torch.full_like(g[hit], r), g[hit], b[hit]])
             for r in range(256) for hit in [((2989 * r + 5870 * g + 1140 * b) % 10_000 == 0) & (r + g + b > 0)]]
    return torch.cat(found, dim=1).to(torch.uint8)


def test_off_by_one_only_where_the_exact_value_is_next_to_an_integer_passes():
    x = random_image(40, 100, seed=1)
    whole = whole_greys()
    x.view(3, -1)[:, :whole.shape[1]] = whole  # the first pixels' exact grey values are whole numbers
    exact = rgb2grey_exact(x)
    near = (exact - exact.round()).abs() < 1e-9  # whole, up to float64's own rounding
    assert int(near.sum()) >= 1000
    truncated = rgb2grey(x).to(torch.int16)
    # a float32 kernel's sum lands a hair above or below a whole number, by its order of operations (FMA or not):
    # each whole pixel on the other side from rgb2grey's, k - 1 for k and k for k - 1, must pass
    other_side = exact.round().to(torch.int16) - (truncated == exact.round()).to(torch.int16)
    fused = torch.where(near, other_side, truncated)
    assert bool((fused != truncated)[near].all())
    judge_grey(fused.to(torch.uint8), Case("random", (x,)), "fma")
    # and off by one toward a whole number 0.002 to 0.01 away is wrong (a float32 sum is off by far less than 0.001):
    # one too high just below one, one too low just above one
    frac = exact - exact.floor()
    off_by_one = truncated.clone()
    off_by_one[tuple(((0.99 <= frac) & (frac <= 0.998) & (truncated < 255)).nonzero()[0])] += 1
    off_by_one[tuple(((0.002 <= frac) & (frac <= 0.01) & (truncated > 0)).nonzero()[0])] -= 1
    with pytest.raises(AssertionError, match="2 of 4,000 pixels are wrong"):
        judge_grey(off_by_one.to(torch.uint8), Case("random", (x,)), "off by one")


def test_a_wrong_black_pixel_is_told_it_should_be_0():
    x = torch.zeros(3, 2, 3, dtype=torch.uint8)  # black: exact grey 0, which the slack puts a hair below 0
    out = torch.zeros(2, 3, dtype=torch.uint8)
    out[1, 2] = 7
    with pytest.raises(AssertionError, match=r"yours 7, expected 0 \(r=0, g=0, b=0: .* = 0\.0000, truncated to 0\)"):
        judge_grey(out, Case("tiny", (x,)), "k")


# ---- known-wrong answers fail, each for its own reason

def fails(fn, case, *patterns, seed=None):
    with pytest.raises(AssertionError) as info:
        check_rgb2grey(fn, case, seed=seed)
    for p in patterns:
        assert p in str(info.value), str(info.value)
    return str(info.value)


def test_rounding_is_caught_with_its_diagnosis():
    fails(vectorised(post=torch.round), "photo", "pixels are wrong", "that is rounding")


def test_classic_weights_0_299_are_caught_on_the_photo():
    fails(vectorised(weights=(0.299, 0.587, 0.114)), "photo", "pixels are wrong", "check the weights",
          "your values match the weights 0.299, 0.587, 0.114")


def test_swapped_channels_are_caught():
    fails(vectorised(order=(0, 2, 1)), "ragged", "first at row", "yours", "expected", "the wrong channels")


def test_missing_guard_is_caught_as_an_indexerror_with_block_and_thread():
    fails(make_pybk(no_guard_bk), "tiny", "IndexError", "block 0, thread 1")


def test_grid_too_small_leaves_pixels_unwritten():
    fails(make_pybk(rgb2grey_bk, grid=lambda n, t: n // t), "ragged", "pixels are wrong")


def test_wrong_shape_is_caught():
    fails(lambda x: rgb2grey(x).flatten(), "ragged", "shape", "expected (7, 37)")


def test_wrong_dtype_is_caught():
    fails(lambda x: rgb2grey(x).float(), "tiny", "dtype torch.float32", "torch.uint8")


def test_returning_nothing_is_caught():
    fails(lambda x: None, "tiny", "returned NoneType")


def test_returning_the_red_channel_is_caught():
    fails(lambda x: x[0], "photo", "pixels are wrong")


def test_writing_into_the_input_is_caught():
    def mutates(x):
        y = rgb2grey(x)
        x[0] = 0
        return y
    fails(mutates, "tiny", "changed its input")


def test_message_names_coordinates_and_values():
    msg = fails(vectorised(post=lambda v: v + 1), "ragged", "first at row 0, col 0", "yours", "expected", "Hint:")
    assert "259 pixels" in msg


def test_unknown_case_is_a_clear_error():
    with pytest.raises(ValueError, match="choose one of"):
        check_rgb2grey(rgb2grey, "huge")


def test_passing_the_result_instead_of_the_function_is_a_clear_error():
    with pytest.raises(TypeError, match="pass your function itself"):
        check_rgb2grey(rgb2grey(grey_cases("tiny", None, PYTHON)[0].args[0]))


def test_unwritten_pixels_are_reported_as_never_written():
    x = grey_cases("ragged", None, CUDA)[0].args[0]
    out = rgb2grey(x).clone()
    out[-1, -5:] = 171
    with pytest.raises(AssertionError, match="never written"):
        judge_grey(out, Case("ragged", (x,)), "k", unwritten=out == 171)


# ---- hidden sizes, hangs, printing

def test_hidden_sizes_depend_on_the_seed_and_need_one():
    a = [c.args[0].shape for c in grey_cases("random", 1, PYTHON)]
    b = [c.args[0].shape for c in grey_cases("random", 2, PYTHON)]
    assert a != b
    with pytest.raises(ValueError, match="needs a seed"):
        RGB2GREY.inputs("random", None, PYTHON)


def test_an_answer_hard_coded_to_the_visible_sizes_fails_the_hidden_ones():
    seen = {tuple(c.args[0].shape[1:]) for case in CASES for c in grey_cases(case, None, PYTHON)}

    def memorised(x):
        return rgb2grey(x) if tuple(x.shape[1:]) in seen else torch.zeros(x.shape[1:], dtype=torch.uint8)
    for c in CASES:
        check_rgb2grey(memorised, c)
    fails(memorised, "random", "pixels are wrong", seed=3)


def test_a_function_that_never_returns_is_stopped():
    def forever(x):
        while True:
            pass
    with pytest.raises(AssertionError, match="did not finish within 1 s"):
        call_quietly(forever, (None,), "forever", "a test", seconds=1)


def test_a_timeout_says_it_ran_past_the_limit_and_gives_both_causes():
    with pytest.raises(AssertionError) as info:
        call_quietly(lambda x: run_kernel(slow_kernel, 3, x), (torch.zeros(3),), "f", "a test", seconds=1)
    message = str(info.value)
    assert "ran past the check's time limit" in message and "for j in range(10**9):" in message
    assert "loops over every element itself" in message and "never ends" in message


def test_a_checks_child_started_afresh_writes_its_log_and_gives_its_exit_code(tmp_path):
    log = tmp_path / "output.txt"  # an environment of its own: a fresh interpreter, not a fork of the warm server
    code = in_child("run", [tmp_path / "no-job.pt", tmp_path / "result.pt"], log, 120, env=dict(os.environ))
    assert code == 1 and "no-job.pt" in log.read_text()


def slow_kernel(i, x):
    for j in range(10**9):
        x[i] = j


def test_a_verdict_carries_no_frames_of_the_course_below_the_check():
    import traceback
    with pytest.raises(AssertionError) as info:
        check_rgb2grey(vectorised(post=torch.round), "ragged")
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert names[-1] == "check_rgb2grey" and "judge_grey" not in names and "check_python" not in names


def test_unwritten_output_with_too_few_threads_names_the_grid():
    empty = lambda *args, **kwargs: torch.empty(*args, **kwargs)  # noqa: E731 (the check's pre-filled one)
    fails(make_pybk(rgb2grey_bk, grid=lambda n, t: n // t, make=empty), "ragged",
          "never written", "ran 256 threads (1 block of 256) for 259 elements", "cdiv(n, threads)")


def test_a_function_that_prints_to_stderr_passes_quietly(capfd):
    import sys

    def chatty(x):
        print("working", file=sys.stderr)
        print("working")
        return rgb2grey(x)
    check_rgb2grey(chatty, "ragged")
    out, err = capfd.readouterr()
    assert err == "" and out.strip() == "chatty: ragged passed"


# ---- integrity: the profile of a call tells a kernel of one's own from PyTorch's

GPU_EVENTS = [("cpu", "aten::empty"), ("cpu", "cudaLaunchKernel"), ("cuda", "k(unsigned char*, unsigned char*, int)")]
TORCH_EVENTS = [("cpu", "aten::mul"), ("cpu", "aten::add"), ("cpu", "aten::_to_copy"),
                ("cuda", "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float> >")]


def test_a_kernel_of_ones_own_is_recognised_by_its_module_on_the_gpu_and_in_cpu_mode():
    assert kernels(GPU_EVENTS, {"k"}) == (["k(unsigned char*, unsigned char*, int)"], [])
    assert kernels([("cpu", "cuda_cpu_launch::rgb_to_grayscale_kernel")], set()) == (["rgb_to_grayscale_kernel"], [])
    assert kernels(TORCH_EVENTS, {"k"}) == ([], [TORCH_EVENTS[-1][1]])
    assert torch_ops(GPU_EVENTS) == []
    assert torch_ops(TORCH_EVENTS) == ["aten::_to_copy", "aten::add", "aten::mul"]


def test_a_students_kernel_is_told_from_a_librarys_by_its_module_not_its_name():
    gemm = ("cuda", "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas")
    mine = ("cuda", "void matmul_cublas_like<16>(float const*, float const*, float*, int, int, int)")
    assert kernels([gemm, mine], {"matmul_cublas_like"}) == ([mine[1]], [gemm[1]])
    fill = ("cuda", "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                    "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
    assert kernels([fill, mine], {"matmul_cublas_like"}) == ([mine[1]], [])  # torch::zeros may make the output
    copies = [("cuda", "Memcpy HtoD (Pageable -> Device)"), ("cuda", "Memset (Device)")]  # the first as the H200 named it
    assert kernels(copies + [mine], {"matmul_cublas_like"}) == ([mine[1]], [])  # cudaMemcpyToSymbol may set a counter


def integrity(events, first, again):
    return Run(value=first, again=again, events=events)


def test_computing_with_pytorch_fails_integrity_naming_the_operations():
    y = torch.zeros(2, 2, dtype=torch.uint8)
    with pytest.raises(AssertionError, match="PyTorch operation.*aten::add, aten::mul"):
        judge_integrity("f", "a 2x2 image", integrity(TORCH_EVENTS + GPU_EVENTS, y, y), {"k"})
    with pytest.raises(AssertionError, match="no kernel of its own"):
        judge_integrity("f", "a 2x2 image", integrity([("cpu", "aten::empty")], y, y), {"k"})
    with pytest.raises(AssertionError, match="not in your source"):
        judge_integrity("f", "a 2x2 image", integrity(GPU_EVENTS + [("cuda", "cublas_gemm")], y, y), {"k"})


def test_the_allowed_operations_cannot_be_widened_in_place():
    from course.harness import integrity as integ
    with pytest.raises(AttributeError):
        integ.ALLOWED_OPS.add("aten::mul")


def test_two_runs_that_differ_are_diagnosed_as_a_race_or_an_undefined_read():
    y = torch.zeros(2, 2, dtype=torch.uint8)
    z = y.clone()
    z[1, 0] = 9
    with pytest.raises(AssertionError, match="race") as info:
        judge_integrity("f", "a 2x2 image", integrity(GPU_EVENTS, y, z), {"k"})
    assert "index [1, 0]: 0, then 9" in str(info.value) and "memory check tells the two apart" in str(info.value)
    judge_integrity("f", "a 2x2 image", integrity(GPU_EVENTS, y, y.clone()), {"k"})


@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU")
def test_cuda_check_without_a_gpu_in_gpu_mode_is_the_graders_fault(monkeypatch):
    # GPU mode asked for (COURSE_CPU_MODE=0) with no GPU: no verdict on the answer, a fault that stops its grading
    monkeypatch.setenv("COURSE_CPU_MODE", "0")
    with pytest.raises(GraderFault, match="grader's set-up") as info:
        check_rgb2grey_cuda(object(), "tiny")
    assert not isinstance(info.value, AssertionError)


def test_a_crash_after_a_stray_write_names_the_write():
    # a stray write through a pointer into the heap (a wrapper's, or a CPU-mode kernel's) may hit glibc's bookkeeping
    for output in ("free(): invalid size", "malloc(): corrupted top size", "double free or corruption (out)"):
        assert "outside a tensor" in str(_crashed(-signal.SIGABRT, f"{output}\n"))
    assert "outside a tensor" in str(_crashed(-signal.SIGSEGV, ""))
    other = str(_crashed(-signal.SIGABRT, "terminate called after throwing an instance of 'std::runtime_error'"))
    assert "SIGABRT" in other and "outside a tensor" not in other

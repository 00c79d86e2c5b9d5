"""The Triton rung: a right launch function passes every grayscale case; the classic mistakes fail with a hint.

Run in CPU mode here (Triton's interpreter); each kernel is the lesson's with one mistake.
"""
import importlib.util
import re

import pytest
import torch
import triton
import triton.language as tl

import course
from course.grading.nbgrader.trusted import judge_cell
from course.harness.rungs import RUNGS, TRITON
from course.harness.triton import jit_names, source_of, written
from course.topics.grayscale import RGB2GREY, check_rgb2grey_triton
from tests.test_rungs import InProcess

pytestmark = pytest.mark.skipif(not course.cpu_mode(), reason="these verdicts are CPU mode's; the GPU session checks its own")

BLOCK = 256


@triton.jit
def grey_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = tl.load(x_ptr + offs, mask=mask)
    g = tl.load(x_ptr + n + offs, mask=mask)
    b = tl.load(x_ptr + 2 * n + offs, mask=mask)
    y = 0.2989 * r.to(tl.float32) + 0.5870 * g.to(tl.float32) + 0.1140 * b.to(tl.float32)
    tl.store(out_ptr + offs, y.to(tl.uint8), mask=mask)


def rgb2grey_triton(x):
    c, h, w = x.shape
    n = h * w
    out = torch.empty((h, w), dtype=x.dtype, device=x.device)
    grey_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


def launch(kernel, x):
    """The lesson's launch of another kernel: the mistakes below are in the kernels."""
    n = x.shape[1] * x.shape[2]
    out = torch.empty(x.shape[1:], dtype=x.dtype, device=x.device)
    kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


@triton.jit
def no_mask_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r = tl.load(x_ptr + offs)
    g = tl.load(x_ptr + n + offs)
    b = tl.load(x_ptr + 2 * n + offs)
    y = 0.2989 * r.to(tl.float32) + 0.5870 * g.to(tl.float32) + 0.1140 * b.to(tl.float32)
    tl.store(out_ptr + offs, y.to(tl.uint8))


def no_mask(x):
    return launch(no_mask_kernel, x)


@triton.jit
def store_unmasked_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = tl.load(x_ptr + offs, mask=mask)
    g = tl.load(x_ptr + n + offs, mask=mask)
    b = tl.load(x_ptr + 2 * n + offs, mask=mask)
    y = 0.2989 * r.to(tl.float32) + 0.5870 * g.to(tl.float32) + 0.1140 * b.to(tl.float32)
    tl.store(out_ptr + offs, y.to(tl.uint8))


def store_unmasked(x):
    return launch(store_unmasked_kernel, x)


@triton.jit
def other_axis_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # the grid is along axis 0: axis 1's id is always 0
    mask = offs < n
    r = tl.load(x_ptr + offs, mask=mask)
    g = tl.load(x_ptr + n + offs, mask=mask)
    b = tl.load(x_ptr + 2 * n + offs, mask=mask)
    y = 0.2989 * r.to(tl.float32) + 0.5870 * g.to(tl.float32) + 0.1140 * b.to(tl.float32)
    tl.store(out_ptr + offs, y.to(tl.uint8), mask=mask)


def other_axis(x):
    return launch(other_axis_kernel, x)


@triton.jit
def no_offset_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) + tl.arange(0, BLOCK)  # the program's offset not scaled by BLOCK
    mask = offs < n
    r = tl.load(x_ptr + offs, mask=mask)
    g = tl.load(x_ptr + n + offs, mask=mask)
    b = tl.load(x_ptr + 2 * n + offs, mask=mask)
    y = 0.2989 * r.to(tl.float32) + 0.5870 * g.to(tl.float32) + 0.1140 * b.to(tl.float32)
    tl.store(out_ptr + offs, y.to(tl.uint8), mask=mask)


def no_offset(x):
    return launch(no_offset_kernel, x)


@triton.jit
def half_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = tl.load(x_ptr + offs, mask=mask).to(tl.float16)
    g = tl.load(x_ptr + n + offs, mask=mask).to(tl.float16)
    b = tl.load(x_ptr + 2 * n + offs, mask=mask).to(tl.float16)
    y = r * 0.2989 + g * 0.5870 + b * 0.1140  # a float16 sum: 11 bits of mantissa
    tl.store(out_ptr + offs, y.to(tl.uint8), mask=mask)


def half_sum(x):
    return launch(half_kernel, x)


def torch_beside(x):
    out = torch.empty(x.shape[1:], dtype=x.dtype, device=x.device)
    grey_kernel[(1,)](x, out, 0, BLOCK=16)  # a launch that does nothing, for show
    r, g, b = x.float()
    return (0.2989 * r + 0.5870 * g + 0.1140 * b).to(torch.uint8)


def never_launches(x):
    return torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)


def test_the_triton_rung_is_one_of_the_courses_with_the_check_exported():
    assert RUNGS["triton"] is TRITON and course.check_rgb2grey_triton is check_rgb2grey_triton
    assert check_rgb2grey_triton.answer_kind == "triton"


@pytest.mark.parametrize("case", [*RGB2GREY.case_names["triton"], "memory", "integrity"])
def test_a_right_launch_function_passes_every_case(case, capsys):
    check_rgb2grey_triton(rgb2grey_triton, case, seed=7 if case == "random" else None)
    assert capsys.readouterr().out == f"rgb2grey_triton: {case} passed\n"


def test_the_source_sent_to_the_child_holds_the_kernel_its_constants_and_imports():
    source = source_of(rgb2grey_triton)
    assert source.name == "rgb2grey_triton" and "BLOCK = 256" in source.text and "import triton.language as tl" in source.text
    assert jit_names(written(source)) == {"grey_kernel"}


@pytest.mark.parametrize("fn, where", [(no_mask, "in no_mask_kernel: `b = tl.load(x_ptr + 2 * n + offs)`"),
                                       (store_unmasked, "in store_unmasked_kernel: `tl.store(out_ptr + offs, ")])
def test_a_missing_mask_is_caught_by_the_memory_check_at_its_line(fn, where):
    with pytest.raises(AssertionError, match=r"(?s)memory check found an access outside a tensor.*"
                                             + re.escape(where) + r".*Hint: .*mask=mask"):
        check_rgb2grey_triton(fn, "memory")


def test_a_missing_mask_passes_the_output_cases_as_on_a_gpu():
    check_rgb2grey_triton(no_mask, "ragged")


@pytest.mark.parametrize("fn", [other_axis, no_offset])
def test_wrong_offsets_fail_with_the_pixels_that_are_wrong(fn):
    with pytest.raises(AssertionError, match=rf"(?s){fn.__name__}: [\d,]+ of [\d,]+ pixels are wrong for a .*\n  first at row.*never written"):
        check_rgb2grey_triton(fn, "ragged")


def test_a_float16_sum_is_wrong_on_the_photo():
    with pytest.raises(AssertionError, match=r"half_sum: [\d,]+ of 19,200 pixels are wrong for the photo"):
        check_rgb2grey_triton(half_sum, "photo")


def test_torch_computing_beside_a_dummy_kernel_fails_integrity():
    with pytest.raises(AssertionError, match=r"torch_beside computed with the PyTorch operation\(s\) .*aten::mul.*"
                                             r"Hint: .*creates the output \(torch.empty\) and launches your kernel"):
        check_rgb2grey_triton(torch_beside, "integrity")


def test_a_function_that_never_launches_a_kernel_fails_integrity():
    with pytest.raises(AssertionError, match=r"never_launches launched no kernel of its own .*kernel\[grid\]"):
        check_rgb2grey_triton(never_launches, "integrity")


def test_the_trusted_judge_collects_the_launch_function_as_source(capsys):
    judge_cell(InProcess({"mine": rgb2grey_triton}), '"""Triton grayscale."""\ncheck_rgb2grey_triton(mine, "tiny")')
    assert capsys.readouterr().out == "rgb2grey_triton: tiny passed\n"


def floor_grid(x):
    n = x.shape[1] * x.shape[2]
    out = torch.empty(x.shape[1:], dtype=x.dtype, device=x.device)
    grey_kernel[(n // BLOCK,)](x, out, n, BLOCK=BLOCK)  # rounds down: the last n % BLOCK pixels get no program
    return out


@pytest.mark.parametrize("case, said", [("tiny", "0 programs; triton.cdiv(n, BLOCK_SIZE) rounds up"),
                                        ("ragged", "n // BLOCK_SIZE programs, which rounds down")])
def test_a_hint_speaks_the_triton_rungs_words_not_cudas(case, said):
    with pytest.raises(AssertionError) as info:
        check_rgb2grey_triton(floor_grid, case)
    message = str(info.value)
    assert "never written" in message and said in message
    assert not re.search(r"threadIdx|blockIdx|<<<|input\.options|cdiv\(n, threads\)", message), message


@triton.jit
def far_store_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs + (1 << 40), tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def rgb2grey_far_store(x):
    return launch(far_store_kernel, x)


def test_isolated_runs_a_launch_function_in_a_process_of_its_own_and_outlives_its_crash():
    from course.harness.children import KernelFailed
    x = torch.randint(0, 256, (3, 7, 37), dtype=torch.uint8)
    assert torch.equal(course.isolated(rgb2grey_triton)(x), course.rgb2grey(x))
    with pytest.raises(KernelFailed, match="crashed"):
        course.isolated(rgb2grey_far_store)(x)


RED = 0.2989  # a plain global: the interpreter reads it, Triton's compiler refuses it in a kernel


@triton.jit
def global_weight_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = tl.load(x_ptr + offs, mask=mask)
    g = tl.load(x_ptr + n + offs, mask=mask)
    b = tl.load(x_ptr + 2 * n + offs, mask=mask)
    y = RED * r.to(tl.float32) + 0.5870 * g.to(tl.float32) + 0.1140 * b.to(tl.float32)
    tl.store(out_ptr + offs, y.to(tl.uint8), mask=mask)


def global_weight(x):
    return launch(global_weight_kernel, x)


def test_cpu_mode_refuses_what_the_gpus_compiler_refuses_though_the_interpreter_would_run_it():
    with pytest.raises(AssertionError, match=r"(?s)CompilationError: at \d+:\d+:.*Cannot access global variable RED.*"
                                             r"Hint: a @triton.jit kernel may read a global only if it is a "
                                             r"tl.constexpr: define it as `RED = tl.constexpr\(...\)`"):
        check_rgb2grey_triton(global_weight, "tiny")


def test_tiles_that_need_more_shared_memory_than_the_gpu_has_fail_as_they_would_there(tmp_path, monkeypatch):
    # Triton fits its pipelining to the H200's 227 KB, so tiles that overflow it are rare and slow to compile: the
    # limit is lowered here instead, below the 4 KB a 32x32 tl.dot of float32 tiles takes.
    from triton.runtime.errors import OutOfResources
    from course.harness import triton as rung
    path = tmp_path / "tiles.py"
    path.write_text('import triton\nimport triton.language as tl\n\n\n@triton.jit\n'
                    'def dot_kernel(m_ptr, out_ptr, B: tl.constexpr):\n'
                    '    i = tl.arange(0, B)\n'
                    '    a = tl.load(m_ptr + i[:, None]*B + i[None, :])\n'
                    '    tl.store(out_ptr + i[:, None]*B + i[None, :], tl.dot(a, a, input_precision="ieee"))\n')
    spec = importlib.util.spec_from_file_location("tiles", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tile = torch.zeros(32, 32)
    rung.compile_for_gpu(str(path), module.dot_kernel, (tile, tile), {"B": 32}, set())  # fits the H200
    monkeypatch.setattr(rung, "GPU_SHARED", 1024)
    with pytest.raises(OutOfResources, match="shared memory, Required: 4096, Hardware limit: 1024"):
        rung.compile_for_gpu(str(path), module.dot_kernel, (tile, tile), {"B": 32}, set())

"""load_cuda: builds once per source, rebuilds an edited one, shows compiler errors in the student's lines, stays quiet."""
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from course import CompileError, cdiv, cuda_begin, load_cuda
from course.toolchain.errors import compiler_errors
from course.topics.grayscale import CPP_SRC, CUDA_SRC
from tests.support import ROOT

KERNEL, CPP = CUDA_SRC, CPP_SRC


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("builds")
    # These tests are about the GPU build (nvcc): CPU mode has its own, tests/test_cpu_mode.py.
    saved = {k: os.environ.get(k) for k in ("COURSE_BUILD_DIR", "COURSE_CPU_MODE")}
    os.environ.update(COURSE_BUILD_DIR=str(d), COURSE_CPU_MODE="0")
    yield d
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_cdiv_rounds_up():
    assert [cdiv(n, 256) for n in (1, 256, 257, 1000, 0)] == [1, 1, 2, 4, 0]


@pytest.mark.parametrize("funcs", [[], ["not a name"], [3]])
def test_bad_funcs_are_rejected_before_compiling(funcs):
    with pytest.raises(ValueError, match="funcs"):
        load_cuda(KERNEL, CPP, funcs)


def test_sources_must_be_strings():
    with pytest.raises(TypeError, match="strings"):
        load_cuda(None, CPP, ["rgb_to_grayscale"])


def test_compiler_errors_keep_nvcc_and_gcc_messages_with_the_source_line():
    log = textwrap.dedent("""\
        [1/3] /usr/local/cuda/bin/nvcc ... -c kernel.cu -o kernel.cuda.o
        FAILED: kernel.cuda.o
        cuda_src(3): error: identifier "y" is undefined
              out[i] = y;
                       ^
        1 error detected in the compilation of "kernel.cu".
        cpp_src:1:15: error: 'Tensr' in namespace 'torch' does not name a type
        ninja: build stopped: subcommand failed.
        """)
    text = compiler_errors(log, ("a\nb\n    out[i] = y;\n", "torch::Tensr f();"))
    assert 'cuda_src(3): error: identifier "y" is undefined' in text
    assert "   3 |     out[i] = y;" in text
    assert "cpp_src:1:15: error" in text and "   1 | torch::Tensr f();" in text
    assert "ninja" not in text and "nvcc ..." not in text


def test_compile_is_quiet_cached_and_rebuilt_when_edited(build_dir):
    # A cold build in a fresh process writes nothing to stderr (nbgrader zeroes cells that do).
    code = ("import sys; sys.path.insert(0, %r); from tests.test_cuda import KERNEL, CPP; "
            "from course import load_cuda; m = load_cuda(KERNEL, CPP, ['rgb_to_grayscale']); print(m.__file__)"
            % str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "COURSE_BUILD_DIR": str(build_dir)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    so = Path(proc.stdout.strip().splitlines()[-1])
    built_at = so.stat().st_mtime

    # The same source in another process: loaded, not rebuilt.
    t = time.perf_counter()
    m = load_cuda(KERNEL, CPP, ["rgb_to_grayscale"])
    assert time.perf_counter() - t < 10
    assert Path(m.__file__) == so and so.stat().st_mtime == built_at
    assert callable(m.rgb_to_grayscale)
    assert load_cuda(KERNEL, CPP, ["rgb_to_grayscale"]) is m

    # An edited source gets its own module: never a stale one under a fixed name.
    edited = load_cuda(KERNEL.replace("0.1140f", "0.1141f"), CPP, ["rgb_to_grayscale"])
    assert Path(edited.__file__) != so


def test_compile_error_points_into_the_students_source(build_dir):
    broken = KERNEL.replace("out[i] = 0.2989f", "out[i] = 0.2989f*y")
    line = next(n for n, text in enumerate(broken[len(cuda_begin):].split("\n"), 1) if "*y" in text)
    with pytest.raises(CompileError) as info:
        load_cuda(broken, CPP, ["rgb_to_grayscale"])
    msg = str(info.value)
    assert f'cuda_src({line}): error: identifier "y" is undefined' in msg
    assert "0.2989f*y" in msg
    assert "ninja" not in msg and len(msg.splitlines()) < 15


def test_declared_but_undefined_function_is_explained(build_dir):
    with pytest.raises(CompileError, match=r"cpp_src declares `rgb_to_grayscale\(torch::Tensor\)`"):
        load_cuda(KERNEL.replace("torch::Tensor rgb_to_grayscale(torch::Tensor input)",
                                 "torch::Tensor rgb_to_greyscale(torch::Tensor input)"), CPP, ["rgb_to_grayscale"])


FAR = KERNEL.replace("out[i] =", "out[i + (i == n - 1 ? (1 << 28) : 0)] =")


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a GPU: the fault is the GPU's")
def test_an_isolated_call_that_faults_on_the_gpu_leaves_this_process_able_to_use_it(build_dir):
    import torch
    from course import isolated
    x = torch.randint(0, 256, (3, 37, 53), dtype=torch.uint8, device="cuda")
    with pytest.raises(AssertionError, match="outside a tensor"):
        isolated(load_cuda(FAR, CPP, ["rgb_to_grayscale"])).rgb_to_grayscale(x)
    grey = isolated(load_cuda(KERNEL, CPP, ["rgb_to_grayscale"])).rgb_to_grayscale(x)
    assert grey.device == x.device and grey.shape == (37, 53)
    assert int((x.float().sum() + 1).item()) > 0  # this process's CUDA context still works

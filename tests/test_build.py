"""load_cuda's split build: which sources take it, what an edit recompiles, errors on the student's line and column in
both modes, the explained torch-arithmetic error, and the one-unit build for what cannot be split."""
import ast
import json
import os
import re

import pytest
import torch

from course import CompileError, cuda_begin, load_cuda
from course.toolchain import objects, split, toolkit
from course.toolchain.load import build_report
from course.toolchain.toolkit import cuda_tool
from course.topics.grayscale import CPP_SRC, CUDA_SRC
from tests.host_idioms import IDIOMS
from tests.support import ROOT

GREY_CPP = CPP_SRC
GREY = CUDA_SRC.replace(">>>(\n            input", ">>>(input")  # the launch on one line: a column past it

pytestmark = pytest.mark.xdist_group("build")  # one worker: the cold precompiled headers of each mode are built once


def student_line(src, needle):
    """The line of the student's cell holding needle: counted after cuda_begin, as load_cuda's messages count."""
    return next(n for n, text in enumerate(src[len(cuda_begin):].split("\n"), 1) if needle in text)


def column(src, needle):
    line = src[len(cuda_begin):].split("\n")[student_line(src, needle) - 1]
    return line.index(needle) + 1


# ---- which sources take the split build (no compiler needed) ---------------------------------------

def assigned_sources(code, where):
    """{name: source} of the *_src strings code assigns from cuda_begin (its other statements are not run)."""
    ns = {"cuda_begin": cuda_begin}
    for node in ast.parse(re.sub(r"^%.*$", "", code, flags=re.M)).body:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            try:
                exec(compile(ast.Module([node], []), where, "exec"), ns)
            except Exception:  # an assignment that needs what the notebook computed: not a source
                pass
    return {k: v for k, v in ns.items() if k.endswith("_src") and isinstance(v, str) and v.startswith(cuda_begin)}


def course_sources():
    """(name, source) of every CUDA source of the lessons, drills and grading corpus built from cuda_begin."""
    out = []
    for nb in sorted(ROOT.glob("source/**/*.ipynb")) + sorted(ROOT.glob("release/**/*.ipynb")):
        for n, cell in enumerate(json.loads(nb.read_text())["cells"]):
            text = "".join(cell["source"])
            if cell["cell_type"] == "code" and "cuda_begin" in text:
                out += [(f"{nb.relative_to(ROOT)}[{n}]:{k}", v) for k, v in assigned_sources(text, str(nb)).items()]
    for f in sorted((ROOT / "tests" / "corpus").glob("*/*/*.py")):
        text = f.read_text()
        if "cuda_begin" in text:
            out += [(f"{f.relative_to(ROOT)}:{k}", v) for k, v in assigned_sources(text, str(f)).items()]
    return out


COURSE_SOURCES = course_sources()


def test_the_course_has_its_sources():
    names = [n for n, _ in COURSE_SOURCES]
    assert any(re.search(r"source/grayscale/04_L3_cuda.ipynb\[\d+\]:cuda_src$", n) for n in names)
    assert any(re.search(r"05_tiling.ipynb\[\d+\]:dyn_src$", n) for n in names)
    assert any(re.search(r"05_tiling.ipynb\[\d+\]:rt_src$", n) for n in names)
    assert sum("tests/corpus/grayscale/cuda_" in n for n in names) >= 40
    assert sum("tests/corpus/matmul/" in n for n in names) >= 25


@pytest.mark.parametrize("name, src", COURSE_SOURCES, ids=[n for n, _ in COURSE_SOURCES])
def test_every_course_source_takes_the_split_build(name, src):
    assert split.describe(src) == (True, "split")


LECTURE_STYLE = r"""
#include <torch/extension.h>
#define CHECK_INPUT(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
inline unsigned int cdiv(unsigned int a, unsigned int b) { return (a + b - 1) / b; }
""" + GREY[len(cuda_begin):]

UNSPLITTABLE = {
    "lecture-style includes": (LECTURE_STYLE, "does not start with cuda_begin"),
    "conditional compilation": (GREY.replace("__global__ void", "#if 1\n__global__ void", 1).replace(
        "\ntorch::Tensor", "#endif\ntorch::Tensor", 1), "conditional compilation"),
    "kernel handed to the runtime": (GREY.replace("    int threads = 256;", "    int threads = 256;\n    cudaFuncSetAttribute("
                                                  "rgb_to_grayscale_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);"),
                                     "other than to launch it"),
    "namespace": (GREY.replace("__global__ void rgb", "namespace k {}\n__global__ void rgb"), "namespace"),
    "deduced template arguments": (GREY.replace("__global__ void", "template <typename T>\n__global__ void").replace(
        "unsigned char* x, unsigned char* out", "T* x, T* out"), "deduction"),
    "device function called from host code": (GREY.replace("__global__ void", "__device__ int helper() { return 1; }\n"
                                                           "__global__ void").replace("int threads = 256;",
                                                                                     "int threads = 256 * helper();"),
                                              "helper"),
}


@pytest.mark.parametrize("case", list(UNSPLITTABLE))
def test_what_cannot_be_split_says_why(case):
    src, why = UNSPLITTABLE[case]
    ok, reason = split.describe(src)
    assert not ok and why in reason, reason


def test_units_keep_torch_out_of_the_kernels_unit():
    plan = split.analyse(GREY)
    device = split.write_unit(plan, "device", "", split.gpu_launch).source()
    host = split.write_unit(plan, "host", "").source()
    assert "__global__" in device and "torch::" not in device and "rgb_to_grayscale(torch::Tensor" not in device
    assert "__global__" not in host and "torch::Tensor rgb_to_grayscale" in host
    assert '__course_launch_rgb_to_grayscale_kernel::run(::course_split::config("rgb_to_grayscale_kernel", ' in host
    # every line keeps its number: the kernel starts on the student's line 2, the wrapper on line 8
    assert '#line 2 "cuda_src"\n__global__ void rgb_to_grayscale_kernel' in device
    assert '#line 8 "cuda_src"\ntorch::Tensor rgb_to_grayscale' in host


# ---- builds ------------------------------------------------------------------------------------------

@pytest.fixture(params=["cpu", "gpu"])
def mode(request, tmp_path_factory, monkeypatch):
    """Each build test in CPU mode (runs here) and as the GPU build (compiles here; runs where there is a GPU)."""
    if request.param == "gpu" and cuda_tool("nvcc") is None:
        pytest.skip("no nvcc")
    monkeypatch.setenv("COURSE_CPU_MODE", "1" if request.param == "cpu" else "0")
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path_factory.getbasetemp() / f"builds_{request.param}"))
    return request.param


def runs_here(mode):
    return mode == "cpu" or torch.cuda.is_available()


def grey_right(module, mode):
    if not runs_here(mode):
        return True
    x = torch.randint(0, 256, (3, 37, 53), dtype=torch.uint8, device="cpu" if mode == "cpu" else "cuda")
    exact = 0.2989 * x[0].double() + 0.5870 * x[1].double() + 0.1140 * x[2].double()
    out = module.rgb_to_grayscale(x).double()
    return bool(((out - exact.floor()).abs() <= 1).all() and ((out == exact.floor()) | ((exact - exact.round()).abs() < 1e-3)).all())


def steps(module):
    report = build_report(module)
    return report["how"], {re.sub(r" \[.*", "", k): k for k in report["steps"]}


def test_an_edited_kernel_recompiles_only_the_kernels_unit(mode):
    first = load_cuda(GREY, GREY_CPP, ["rgb_to_grayscale"])
    how, _ = steps(first)
    assert how == "split" and grey_right(first, mode)
    kernel = "kernel (g++)" if mode == "cpu" else "kernel (nvcc)"

    edited = load_cuda(GREY.replace("0.1140f", "0.1141f"), GREY_CPP, ["rgb_to_grayscale"])
    how, done = steps(edited)
    assert how == "split" and edited is not first
    assert not done[kernel].endswith("[cached]")
    assert done["wrapper (g++)"].endswith("[cached]") and done["binding (g++)"].endswith("[cached]")
    if mode == "cpu":
        assert done["runtime (g++)"].endswith("[cached]")

    # A kernel one line longer moves the wrapper down a line: the wrapper's object is still the same.
    longer = load_cuda(GREY.replace("    int i =", "    // this thread's pixel\n    int i ="), GREY_CPP, ["rgb_to_grayscale"])
    _, done = steps(longer)
    assert not done[kernel].endswith("[cached]") and done["wrapper (g++)"].endswith("[cached]")
    assert grey_right(longer, mode)

    # An edited wrapper compiles the wrapper's unit alone.
    wrapper = load_cuda(GREY.replace("int threads = 256;", "int threads = 128;"), GREY_CPP, ["rgb_to_grayscale"])
    _, done = steps(wrapper)
    assert done[kernel].endswith("[cached]") and not done["wrapper (g++)"].endswith("[cached]")
    assert grey_right(wrapper, mode)


def compile_error(src, cpp=GREY_CPP, funcs=("rgb_to_grayscale",)):
    with pytest.raises(CompileError) as info:
        load_cuda(src, cpp, list(funcs))
    return str(info.value)


def test_errors_point_at_the_students_line_and_column(mode):
    # In the kernel: nvcc reports the line, g++ (CPU mode) the line and column.
    broken = GREY.replace("out[i] = 0.2989f", "out[i] = 0.2989f*y")
    msg = compile_error(broken)
    line = student_line(broken, "*y")
    assert line == 5
    if mode == "cpu":
        assert f"cuda_src:{line}:{column(broken, 'y*x')}: error:" in msg
    else:
        assert f'cuda_src({line}): error: identifier "y" is undefined' in msg
    assert f"    {line:4d} |         out[i] = 0.2989f*y*x[i]" in msg
    assert "cuda_begin" not in msg and "ninja" not in msg and "course_split" not in msg

    # After a launch on the same line (rewritten to a longer call in CPU mode): the student's column. The GPU build's
    # wrapper failed under g++, so nvcc built the whole source as one unit: its errors are the ones shown.
    broken = GREY.replace("output.data_ptr<unsigned char>(), n);", "outptu.data_ptr<unsigned char>(), n);")
    msg = compile_error(broken)
    line, col = student_line(broken, "outptu"), column(broken, "outptu")
    if mode == "cpu":
        assert f"cuda_src:{line}:{col}: error: ‘outptu’ was not declared" in msg or \
            f"cuda_src:{line}:{col}: error: 'outptu' was not declared" in msg, msg
    else:
        assert f'cuda_src({line}): error: identifier "outptu" is undefined' in msg, msg

    # A wrong argument to the kernel: named as the student's launch, in torch's names as they write them.
    broken = GREY.replace("output.data_ptr<unsigned char>(), n);", "output.data_ptr<float>(), n);")
    msg = compile_error(broken)
    line = student_line(broken, "data_ptr<float>")
    if mode == "cpu":
        found = re.search(rf"cuda_src:{line}:(\d+): error: cannot convert", msg)
        start = column(broken, "output.data_ptr<float>()")
        assert found and start <= int(found.group(1)) < start + len("output.data_ptr<float>()"), msg  # on the argument
        assert "rgb_to_grayscale_kernel<<<...>>>(unsigned char*, unsigned char*, int)" in msg and "__course" not in msg
    else:
        assert f'cuda_src({line}): error: argument of type "float *" is incompatible' in msg, msg
        assert "__course" not in msg

    broken = GREY.replace("int h = input.size(1);", "int h = input.height();")
    msg = compile_error(broken)
    assert "torch::Tensor" in msg and "at::Tensor" not in msg
    assert (f"cuda_src:{student_line(broken, 'height')}:" if mode == "cpu" else f"cuda_src({student_line(broken, 'height')})") in msg


def test_torch_arithmetic_in_the_wrapper_is_explained(mode):
    msg = compile_error(GREY.replace("    return output;", "    auto grey = 0.2989*input[0] + 0.5870*input[1];\n    return output;"))
    assert "operator" in msg and "torch::Tensor" in msg and "at::Tensor" not in msg
    assert "cuda_begin includes only the PyTorch headers" in msg and "forbids them anyway" in msg


def test_a_source_that_cannot_be_split_builds_as_one_unit(mode):
    src, _ = UNSPLITTABLE["conditional compilation"]
    module = load_cuda(src, GREY_CPP, ["rgb_to_grayscale"])
    how, done = steps(module)
    assert how.startswith("one unit: ") and "conditional compilation" in how
    assert grey_right(module, mode)
    # Its errors point at the student's lines too (and columns, in CPU mode, past a rewritten launch).
    broken = src.replace("output.data_ptr<unsigned char>(), n);", "outptu.data_ptr<unsigned char>(), n);")
    msg = compile_error(broken)
    line = student_line(broken, "outptu")
    if mode == "cpu":
        assert f"cuda_src:{line}:{column(broken, 'outptu')}: error:" in msg
    else:
        assert f"cuda_src({line}): error:" in msg


def test_kernels_that_need_torchs_headers_build_as_before(mode):
    # std::clamp came with torch's headers before the split; the CUDA unit lacks it: built as one unit again.
    src = GREY.replace("if (i < n)", "if (std::clamp(i, 0, n) < n)")
    module = load_cuda(src, GREY_CPP, ["rgb_to_grayscale"])
    how = build_report(module)["how"]
    if mode == "gpu":
        assert how == "one unit: the kernels use std::clamp, which torch's headers declare"
    else:  # cuda_cpu.h gives <algorithm> to the kernels' unit
        assert how == "split"
    assert grey_right(module, mode)
    # A mistyped name is the student's error: in CPU mode reported at once, on a GPU as the one-unit build reports it.
    with pytest.raises(CompileError) as info:
        load_cuda(GREY.replace("if (i < n)", "if (i < N)"), GREY_CPP, ["rgb_to_grayscale"])
    assert f"cuda_src:{student_line(GREY, 'if (i < n)')}" in str(info.value).replace("(", ":").replace(")", ":")
    assert info.value.how == ("split" if mode == "cpu" else "one unit: the split build's kernel (nvcc) did not "
                              f"compile (cuda_src({student_line(GREY, 'if (i < n)')}): error: identifier \"N\" is undefined)")


# What the split must get right: a template launched through a generic lambda with an argument from a
# constexpr both sides use, dynamic shared memory, __constant__ and __device__ data the wrapper copies with
# cudaMemcpyToSymbol / cudaMemcpyFromSymbol, a __host__ __device__ function (not inline) and a struct on
# both sides, a host helper, a #define, two kernels.
FEATURES = cuda_begin + r"""
#define SCALE 2.0f
constexpr int TW = 8;
struct Affine { float a, b; };
__constant__ float bias[2];
__device__ int calls;

__host__ __device__ float twice(float x) { return SCALE * x; }

template <int tw>
__global__ void __launch_bounds__(4 * tw) affine_k(const float* __restrict__ x, float* out, int n, Affine f) {
    extern __shared__ float buf[];
    int i = blockIdx.x*tw + threadIdx.x;
    if (i < n) buf[threadIdx.x] = x[i];
    __syncthreads();
    if (i < n) out[i] = f.a*twice(buf[threadIdx.x]) + f.b + bias[i % 2];
    if (i == 0) atomicAdd(&calls, 1);
}

__global__ void fill_k(float* out, int n, float v) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] = twice(v);
}

static int blocks_for(int n) { return cdiv(n, TW); }

torch::Tensor affine(torch::Tensor x, int64_t tw) {
    CHECK_INPUT(x);
    int n = x.numel();
    auto out = torch::empty_like(x);
    float hb[2] = {0.5f, -0.5f};
    C10_CUDA_CHECK(cudaMemcpyToSymbol(bias, hb, sizeof(hb)));
    Affine f{3.0f, 1.0f};
    auto launch = [&](auto kernel, int w) {
        kernel<<<cdiv(n, w), w, w*sizeof(float)>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, f);
    };
    if (tw == TW) launch(affine_k<TW>, TW);
    else launch(affine_k<2*TW>, 2*TW);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor filled(torch::Tensor like, double v) {
    auto out = torch::empty_like(like);
    int n = out.numel();
    fill_k<<<blocks_for(n), TW>>>(out.data_ptr<float>(), n, v);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

int64_t affine_calls() {
    int c = 0;
    C10_CUDA_CHECK(cudaMemcpyFromSymbol(&c, calls, sizeof(c)));
    return c;
}
"""
FEATURES_CPP = """
torch::Tensor affine(torch::Tensor x, int64_t tw);
torch::Tensor filled(torch::Tensor like, double v);
int64_t affine_calls();
"""
FEATURES_FUNCS = ["affine", "filled", "affine_calls"]


def test_split_and_one_unit_builds_agree(mode, monkeypatch):
    assert split.describe(FEATURES) == (True, "split")
    module = load_cuda(FEATURES, FEATURES_CPP, FEATURES_FUNCS)
    assert build_report(module)["how"] == "split"
    monkeypatch.setenv("COURSE_SPLIT", "0")
    whole = load_cuda(FEATURES + "\n", FEATURES_CPP, FEATURES_FUNCS)
    assert build_report(whole)["how"] == "one unit: COURSE_SPLIT=0"
    if not runs_here(mode):
        return
    x = torch.randn(37, device="cpu" if mode == "cpu" else "cuda")
    want = 3 * (2 * x) + 1 + torch.tensor([0.5, -0.5], device=x.device).repeat(19)[:37]
    for m in (module, whole):
        before = m.affine_calls()
        for tw in (8, 16):
            assert torch.allclose(m.affine(x, tw), want)
        assert m.affine_calls() == before + 2
        assert torch.equal(m.filled(x, 1.5), torch.full_like(x, 3.0))


def test_the_split_builds_stubs_record_each_launch_and_cpu_mode_replays_it(mode):
    """The speed test's record (course/harness/record.py): a template kernel launched from a lambda with dynamic shared
    memory, a __restrict__ pointer and a struct by value: two pointers, an int and 8 bytes; CPU mode's replay of
    that record (course_replay, through the module's table of stubs) computes what the wrapper's call does."""
    from course.harness import record, replay
    from course.harness.wire import Recorded
    module = load_cuda(FEATURES, FEATURES_CPP, FEATURES_FUNCS)  # built in both modes: the stubs compile
    if not runs_here(mode) or mode != "cpu":
        return
    x = torch.randn(37)
    calls = record.recorded(module.affine, module.__file__, [(x, 8), (x + 1, 8)], [(0, 0), (0, 0)], cpu=True,
                            triton=False)
    [launch] = calls[0]["launches"]
    assert [(kind, size) for kind, size, _ in launch["args"]] == [("p", 8), ("p", 8), ("s", 4), ("s", 8)]
    assert launch["dims"][:7] == [5, 1, 1, 8, 1, 1, 32] and launch["entry"] >= 0
    plan = replay.plan(Recorded(calls=calls), triton=False, cpu=True)
    assert plan["launches"][0]["args"][:2] == [["p", ["in", 0, 0]], ["p", ["out", 0]]]
    again = replay.Replay(plan, module.__file__, cpu=True, triton=False).prepare((x, 8), 0)()
    assert torch.equal(again, module.affine(x, 8))


def test_a_linker_that_fails_gives_way_to_the_default_one(tmp_path, monkeypatch):
    # As on a host whose gold linker cannot link torch's libraries: CPU mode links with the default linker instead.
    fake = tmp_path / "bin" / "ld.gold"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'this gold cannot link' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("COMPILER_PATH", str(fake.parent))  # where gcc looks for ld.gold first
    monkeypatch.setenv("COURSE_CPU_MODE", "1")
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path / "builds"))
    module = load_cuda(GREY.replace("    int i =", "    // linked by the default linker\n    int i ="), GREY_CPP, ["rgb_to_grayscale"])
    assert grey_right(module, "cpu")


def test_a_compiler_that_fails_and_removes_its_output_is_reported_with_its_message(tmp_path):
    # As g++ does when the disk is full: the output it had begun is gone, and its message must reach the student.
    fake = tmp_path / "fake-g++"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\nrm -f "$2"\n'
                    'echo "fatal error: error writing to $2: No space left on device"\nexit 1\n')
    fake.chmod(0o755)
    job = objects.Job("kernel (g++)", [str(fake)], "int x;\n", ".cpp")
    with pytest.raises(objects.BuildFailed) as e:
        objects.compile_all(tmp_path / "builds", [job])
    assert "No space left on device" in str(e.value)
    assert not list((tmp_path / "builds" / "objects").glob("*.o*"))


def test_a_compiler_that_cannot_run_is_named(tmp_path, monkeypatch):
    # No g++ in CPU mode, no CUDA toolkit for the GPU build: the student reads which tool is missing.
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path / "builds"))
    monkeypatch.setenv("COURSE_CPU_MODE", "1")
    monkeypatch.setenv("CXX", str(tmp_path / "no-g++"))
    src = GREY.replace("    int i =", "    // no compiler builds this\n    int i =")
    said = compile_error(src)
    assert f"{tmp_path / 'no-g++'} could not be run" in said and "not your code" in said
    assert "errors in your source" not in said
    monkeypatch.setenv("COURSE_CPU_MODE", "0")
    monkeypatch.setattr(toolkit, "cuda_home", lambda: None)
    assert "nvcc, the CUDA compiler, was not found" in compile_error(src)


# ---- host code: what nvcc's one-unit build accepts, load_cuda builds ---------------------------------------

@pytest.mark.parametrize("idiom", IDIOMS, ids=[i.name for i in IDIOMS])
def test_host_code_that_nvcc_accepts_builds_and_runs(idiom, mode):
    module = load_cuda(idiom.cuda_src, idiom.cpp_src, list(idiom.funcs))
    if mode == "gpu":  # the split where it can, nvcc's one unit where it cannot (the wrapper's g++ refused it)
        assert build_report(module)["how"].startswith(idiom.gpu_build), build_report(module)["how"]
    if runs_here(mode):
        idiom.check(module, "cpu" if mode == "cpu" else "cuda")


def test_a_failed_split_is_confirmed_by_the_one_unit_build_and_remembered(mode, monkeypatch):
    broken = GREY.replace("int threads = 256;", f"int threads = 256 + undeclared_in_{mode}_host_code;")
    line = student_line(broken, "undeclared_in")
    with pytest.raises(CompileError) as first:
        load_cuda(broken, GREY_CPP, ["rgb_to_grayscale"])
    if mode == "gpu":  # g++ refused the wrapper; nvcc's whole-source build says what the student would have read
        assert first.value.how.startswith("one unit: the split build's wrapper (g++) did not compile")
        assert f'cuda_src({line}): error: identifier "undeclared_in_gpu_host_code" is undefined' in str(first.value)
    else:
        assert first.value.how == "split" and f"cuda_src:{line}:" in str(first.value)
    # The same source again (the next check of the same answer): the same errors, and no compiler runs.
    def compiler(*args, **kwargs):
        raise AssertionError(f"compiled again: {args[0]}")
    monkeypatch.setattr(objects.subprocess, "Popen", compiler)
    with pytest.raises(CompileError) as again:
        load_cuda(broken, GREY_CPP, ["rgb_to_grayscale"])
    assert str(again.value) == str(first.value) and again.value.how == first.value.how

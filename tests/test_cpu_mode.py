"""load_cuda's CPU mode: the students' unchanged CUDA C, compiled by g++ and run on the CPU, right or wrong as on a GPU."""
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from course import CompileError, cuda_begin, load_cuda
from course.toolchain import cpu
from course.toolchain.errors import compiler_errors
from course.toolchain.load import import_compiled, module_path
from course.device import cpu_banner, cpu_mode, device, on_gpu
from course.harness.exercise import Case
from course.topics.grayscale import judge_grey
from tests.support import ROOT

CPP = "torch::Tensor rgb_to_grayscale(torch::Tensor input);"


def solution():
    """The grayscale solution as a student submits it (examples/grayscale/alice, the notebook's solution)."""
    # the cell compiles its source too: only the source is wanted here
    ns = {"cuda_begin": cuda_begin, "cpp_src": CPP, "load_cuda": lambda *args, **kwargs: None}
    exec((ROOT / "examples" / "grayscale" / "alice" / "rgb_to_grayscale_cuda.py").read_text(), ns)
    return ns["cuda_src"]


def student_line(src, needle):
    """The line of the student's cell that holds needle: cuda_src's lines counted after cuda_begin (its first line is
    the cell's `cuda_src = cuda_begin + r\"\"\"`)."""
    assert src.startswith(cuda_begin)
    return next(n for n, text in enumerate(src[len(cuda_begin):].split("\n"), 1) if needle in text)


def grey_is_right(yours, x):
    """check_grey's verdict (each pixel the truncated weighted sum, FMA-tolerant), as a bool."""
    try:
        judge_grey(yours, Case("a test image", (x,)), "kernel")
    except AssertionError:
        return False
    return True


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cpu_builds")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COURSE_BUILD_DIR", str(d))
        mp.setenv("COURSE_CPU_MODE", "1")  # CPU mode even where there is a GPU
        yield d


# ---- no compiler needed ---------------------------------------------------------------------------

def test_mode_switch(monkeypatch):
    monkeypatch.setenv("COURSE_CPU_MODE", "1")
    assert cpu_mode() and device() == torch.device("cpu")
    monkeypatch.setenv("COURSE_CPU_MODE", "0")
    assert not cpu_mode()
    assert device() == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.delenv("COURSE_CPU_MODE")
    assert cpu_mode() == (not torch.cuda.is_available())
    banner = cpu_banner()
    assert "\n" not in banner and "CPU mode" in banner and "timings" in banner


def test_a_gpu_only_cell_says_in_one_line_why_it_does_not_run_in_cpu_mode(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_CPU_MODE", "1")
    assert on_gpu("SASS is a GPU's machine code.") is False
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("Not run: SASS is a GPU's machine code (")
    monkeypatch.setenv("COURSE_CPU_MODE", "0")
    assert on_gpu("SASS is a GPU's machine code") == torch.cuda.is_available()
    assert capsys.readouterr().out.count("\n") == (0 if torch.cuda.is_available() else 1)


def test_translation_keeps_every_line_in_place():
    src = textwrap.dedent(r'''
        #include <c10/cuda/CUDAException.h>
        #include <cooperative_groups.h>
        #include "cuda_runtime.h"
        namespace ns { extern __shared__ float ns_dyn[]; }
        // k<<<1, 2>>>(x) in a comment stays
        __global__ void k(float* x) {
            extern __shared__ __align__(16) float dyn[];
            static __shared__ float tile[32];
            printf("<<<not a launch>>>\n");
        }
        void f(torch::Tensor t) {
            TORCH_CHECK(t.is_cuda());
            k<<<dim3(2, 3),
                256, 64 * sizeof(float)>>>(
                t.data_ptr<float>());
            ns::tk<float, 4><<<1, 32>>>(nullptr);
        }
        ''')
    out = cpu.translate(src)
    assert out.count("\n") == src.count("\n")
    lines, src_lines = out.splitlines(), src.splitlines()
    for n, line in enumerate(src_lines):
        if "TORCH_CHECK" in line or "printf" in line or "comment" in line or "data_ptr" in line:
            assert lines[n] == line.replace("is_cuda()", "is_cpu()")
    assert "given by cuda_cpu.h" in lines[1] and "given by cuda_cpu.h" in lines[3]
    assert lines[2] == '#error "cooperative_groups.h is not available in CPU mode: it needs a GPU"'
    assert "static ::cuda_cpu::DynamicShared<float> ns_dyn;" in lines[4]
    assert "float* dyn = (float*)::cuda_cpu::detail::dynamic_smem;" in lines[7]
    assert "static" not in lines[8] and "__shared__ float tile[32];" in lines[8]
    assert lines[13].strip().startswith('::cuda_cpu::make_launch("k", ') and lines[13].endswith("dim3(2, 3),")
    assert lines[14].endswith("256, 64 * sizeof(float))(")
    assert '::cuda_cpu::make_launch("ns::tk<float,4>", [&]' in lines[16]


def test_compiler_errors_read_gcc_messages():
    log = textwrap.dedent("""\
        [1/3] c++ -MMD -MF kernel.o.d ... -c kernel.cpp -o kernel.o
        FAILED: kernel.o
        cuda_src: In function 'void k(unsigned char*, int)':
        cuda_src:3:20: error: 'y' was not declared in this scope
        ninja: build stopped: subcommand failed.
        """)
    text = compiler_errors(log, ("a\nb\n    out[i] = y;\n", ""))
    assert "cuda_src:3:20: error: 'y' was not declared" in text and "   3 |     out[i] = y;" in text
    assert "ninja" not in text


# ---- the grayscale exercise -----------------------------------------------------------------------

def test_grayscale_solution_builds_quietly_once_and_is_right(build_dir):
    # A cold build in a fresh process writes nothing (nbgrader zeroes cells that write to stderr).
    code = ("import sys; sys.path.insert(0, %r); from tests.test_cpu_mode import solution, CPP; "
            "from course import load_cuda; m = load_cuda(solution(), CPP, ['rgb_to_grayscale']); print(m.__file__)"
            % str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(build_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    so = Path(proc.stdout.strip())
    assert proc.stdout.strip().splitlines() == [str(so)]
    built_at = so.stat().st_mtime

    # The same source in this process: loaded (from here, or from where an earlier test of this worker built it), not rebuilt.
    t = time.perf_counter()
    m = load_cuda(solution(), CPP, ["rgb_to_grayscale"])
    assert time.perf_counter() - t < 10
    assert Path(module_path(m)).name == so.name and so.stat().st_mtime == built_at
    assert load_cuda(solution(), CPP, ["rgb_to_grayscale"]) is m
    assert cpu.is_cpu_module(m)

    # 6 million pixels, the reference's answer; every launch is a profiler event.
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (3, 2000, 3000), dtype=torch.uint8, generator=g)
    before = cpu.launch_count(m)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        grey = m.rgb_to_grayscale(x)
        took = time.perf_counter() - t
    assert grey.device.type == "cpu" and grey.dtype == torch.uint8
    assert grey_is_right(grey, x)
    assert took < 5, f"6 million pixels took {took:.1f} s"
    assert [e.name for e in prof.events() if e.name.startswith("cuda_cpu_launch::")] == \
        ["cuda_cpu_launch::rgb_to_grayscale_kernel"]
    assert cpu.launch_count(m) == before + 1

    # CHECK_INPUT from cuda_begin: a CPU tensor passes, a non-contiguous one does not.
    with pytest.raises(RuntimeError, match="input must be contiguous"):
        m.rgb_to_grayscale(x.transpose(1, 2))

    # A grader loads the compiled file in a child process.
    child = ("import sys, torch; from course.toolchain.load import import_compiled; m = import_compiled(sys.argv[1]); "
             "x = torch.full((3, 2, 2), 100, dtype=torch.uint8); print(m.rgb_to_grayscale(x).tolist())")
    proc = subprocess.run([sys.executable, "-c", child, str(so)], capture_output=True, text=True, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[[99, 99], [99, 99]]"


def test_an_edited_source_rebuilds_and_a_wrong_index_gives_a_wrong_answer(build_dir):
    right = load_cuda(solution(), CPP, ["rgb_to_grayscale"])
    wrong_src = solution().replace("x[i+2*n]", "x[i+n]")
    assert wrong_src != solution()
    wrong = load_cuda(wrong_src, CPP, ["rgb_to_grayscale"])
    assert module_path(wrong) != module_path(right)
    x = torch.randint(0, 256, (3, 31, 37), dtype=torch.uint8)
    assert grey_is_right(right.rgb_to_grayscale(x), x)
    assert not grey_is_right(wrong.rgb_to_grayscale(x), x)


# ---- the CUDA built-ins, several kernels in one source (one compile) ------------------------------

KERNELS = cuda_begin + r"""
// A 2D grid: one thread per element of an h x w matrix.
__global__ void affine2d_kernel(const float* x, float* out, int h, int w) {
    int c = blockIdx.x*blockDim.x + threadIdx.x;
    int r = blockIdx.y*blockDim.y + threadIdx.y;
    if (r < h && c < w) out[r*w + c] = 2.0f*x[r*w + c] + r - 0.5f*c;
}

torch::Tensor affine2d(torch::Tensor x) {
    CHECK_INPUT(x);
    int h = x.size(0), w = x.size(1);
    auto out = torch::empty_like(x);
    dim3 threads(16, 8);
    dim3 blocks(cdiv(w, threads.x), cdiv(h, threads.y));
    affine2d_kernel<<<blocks, threads>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), h, w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// A tree reduction in shared memory, one sum per block of 1024 threads. Without the barrier in the
// loop, threads read partial sums before the threads that write them have run: a race.
template <bool SYNC>
__global__ void block_sum_kernel(const float* x, float* sums, int n) {
    __shared__ float s[1024];
    int t = threadIdx.x;
    int i = blockIdx.x*blockDim.x + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x/2; stride > 0; stride /= 2) {
        if (t < stride) s[t] += s[t + stride];
        if (SYNC) __syncthreads();
    }
    if (t == 0) sums[blockIdx.x] = s[0];
}

torch::Tensor block_sum(torch::Tensor x, bool sync) {
    CHECK_INPUT(x);
    int n = x.numel();
    auto sums = torch::empty({(long)cdiv(n, 1024)}, x.options());
    if (sync) block_sum_kernel<true><<<cdiv(n, 1024), 1024>>>(x.data_ptr<float>(), sums.data_ptr<float>(), n);
    else block_sum_kernel<false><<<cdiv(n, 1024), 1024>>>(x.data_ptr<float>(), sums.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return sums;
}

// Dynamic shared memory, sized by the launch's third argument: each block reverses its slice.
__global__ void reverse_kernel(const int* x, int* out, int n) {
    extern __shared__ int s[];
    int t = threadIdx.x;
    int base = blockIdx.x*blockDim.x;
    if (base + t < n) s[t] = x[base + t];
    __syncthreads();
    int from = blockDim.x - 1 - t;
    if (base + t < n) out[base + t] = s[from];
}

// The same, with the dynamic shared memory declared at file scope.
extern __shared__ int file_smem[];
__global__ void reverse_file_scope_kernel(const int* x, int* out, int n) {
    int t = threadIdx.x;
    int base = blockIdx.x*blockDim.x;
    if (base + t < n) file_smem[t] = x[base + t];
    __syncthreads();
    int* s = file_smem;
    if (base + t < n) out[base + t] = s[blockDim.x - 1 - t];
}

torch::Tensor reverse_blocks(torch::Tensor x, int threads, bool file_scope) {
    CHECK_INPUT(x);
    int n = x.numel();
    auto out = torch::zeros_like(x);
    if (file_scope)
        reverse_file_scope_kernel<<<cdiv(n, threads), threads, threads*sizeof(int)>>>(
            x.data_ptr<int>(), out.data_ptr<int>(), n);
    else
        reverse_kernel<<<cdiv(n, threads), threads, threads*sizeof(int)>>>(x.data_ptr<int>(), out.data_ptr<int>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// A histogram with atomicAdd, in shared memory per block, then into global memory; launched on
// PyTorch's current stream, as extensions often do.
#include <ATen/cuda/CUDAContext.h>
__global__ void histogram_kernel(const unsigned char* x, int* bins, int n) {
    __shared__ int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x*blockDim.x + threadIdx.x; i < n; i += blockDim.x*gridDim.x)
        atomicAdd(&local[x[i]], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

torch::Tensor histogram(torch::Tensor x) {
    CHECK_INPUT(x);
    auto bins = torch::zeros({256}, x.options().dtype(torch::kInt));
    cudaDeviceProp prop;
    C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    histogram_kernel<<<8, prop.maxThreadsPerBlock / 8, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<unsigned char>(), bins.data_ptr<int>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return bins;
}

// The last steps of a reduction in one warp, with __syncwarp between them; and __syncthreads_count.
__global__ void warp_sum_kernel(const float* x, float* out, int* positive) {
    __shared__ float s[64];
    int t = threadIdx.x;
    float mine = x[blockIdx.x*64 + t];
    s[t] = mine;
    int count = __syncthreads_count(mine > 0.5f);
    if (t < 32) {
        float v = s[t] + s[t + 32];
        __syncwarp();
        s[t] = v;
        __syncwarp();
        for (int o = 16; o > 0; o /= 2) {
            if (t < o) v = s[t] + s[t + o];
            __syncwarp();
            if (t < o) s[t] = v;
            __syncwarp();
        }
    }
    if (t == 0) { out[blockIdx.x] = s[0]; positive[blockIdx.x] = count; }
}

std::vector<torch::Tensor> warp_sum(torch::Tensor x) {
    CHECK_INPUT(x);
    int blocks = x.numel() / 64;
    auto out = torch::empty({blocks}, x.options());
    auto positive = torch::empty({blocks}, x.options().dtype(torch::kInt));
    warp_sum_kernel<<<blocks, 64>>>(x.data_ptr<float>(), out.data_ptr<float>(), positive.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {out, positive};
}

// Launches CUDA refuses, and kernels that crash or fail an assert.
#include <assert.h>
__global__ void fault_kernel(int* out, int kind) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (kind == 0 && i == 70) out[i + (1L << 40)] = 1;   // far outside any allocation
    if (kind == 1) assert(i != 100);                     // fails in thread 100 only
    if (kind == 2 && i < 4) printf("block %d thread %d\n", blockIdx.x, threadIdx.x);
    if (kind == 3) out[i] = i;
}

torch::Tensor launch(torch::Tensor x, int kind, int blocks, int threads) {
    CHECK_INPUT(x);
    fault_kernel<<<blocks, threads>>>(x.data_ptr<int>(), kind);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return x;
}
"""
KERNELS_CPP = """
torch::Tensor affine2d(torch::Tensor x);
torch::Tensor block_sum(torch::Tensor x, bool sync);
torch::Tensor reverse_blocks(torch::Tensor x, int threads, bool file_scope);
torch::Tensor histogram(torch::Tensor x);
std::vector<torch::Tensor> warp_sum(torch::Tensor x);
torch::Tensor launch(torch::Tensor x, int kind, int blocks, int threads);
"""
FUNCS = ["affine2d", "block_sum", "reverse_blocks", "histogram", "warp_sum", "launch"]


@pytest.fixture(scope="module")
def kernels(build_dir):
    return load_cuda(KERNELS, KERNELS_CPP, FUNCS)


def test_2d_grid_with_dim3(kernels):
    x = torch.randn(37, 53)
    r, c = torch.arange(37.0)[:, None], torch.arange(53.0)[None]
    assert torch.allclose(kernels.affine2d(x), 2 * x + r - 0.5 * c)


def test_shared_memory_reduction_with_1024_threads(kernels):
    x = torch.rand(1 << 20)
    ref = x.view(-1, 1024).double().sum(1).float()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        sums = kernels.block_sum(x, True)
        took = time.perf_counter() - t
    assert torch.allclose(sums, ref, rtol=1e-5)
    assert took < 20, f"1024 blocks of 1024 threads, 11 barriers each, took {took:.1f} s"
    assert "cuda_cpu_launch::block_sum_kernel<true>" in [e.name for e in prof.events()]


def test_a_missing_barrier_gives_a_wrong_answer(kernels):
    x = torch.rand(1 << 14)
    ref = x.view(-1, 1024).double().sum(1).float()
    assert not torch.allclose(kernels.block_sum(x, False), ref, rtol=1e-3)


@pytest.mark.parametrize("file_scope", [False, True])
def test_dynamic_shared_memory(kernels, file_scope):
    x = torch.arange(1000, dtype=torch.int32)
    assert torch.equal(kernels.reverse_blocks(x, 250, file_scope), x.view(4, 250).flip(1).reshape(-1))


def test_atomic_add_histogram(kernels):
    x = torch.randint(0, 256, (100_000,), dtype=torch.uint8)
    assert torch.equal(kernels.histogram(x), torch.bincount(x.long(), minlength=256).int())


def test_syncwarp_and_syncthreads_count(kernels):
    x = torch.rand(64 * 10)
    sums, positive = kernels.warp_sum(x)
    assert torch.allclose(sums, x.view(-1, 64).sum(1), rtol=1e-5)
    assert torch.equal(positive, (x.view(-1, 64) > 0.5).sum(1).int())


@pytest.mark.parametrize("blocks, threads, error", [
    (0, 32, "CUDA error: invalid argument"),
    (1, 0, "CUDA error: invalid configuration argument"),
    (1, 2048, "CUDA error: invalid configuration argument"),
])
def test_impossible_launches_fail_the_launch_check(kernels, blocks, threads, error):
    with pytest.raises(RuntimeError, match=error) as info:
        kernels.launch(torch.zeros(4, dtype=torch.int32), 3, blocks, threads)
    assert "CPU mode" in str(info.value)
    out = kernels.launch(torch.zeros(1024, dtype=torch.int32), 3, 1, 1024)  # the error does not stick
    assert torch.equal(out, torch.arange(1024, dtype=torch.int32))


def test_a_crash_or_a_failed_assert_ends_the_launch_not_the_process(kernels, capfd):
    with pytest.raises(RuntimeError, match="CUDA error: an illegal memory access was encountered"):
        kernels.launch(torch.zeros(256, dtype=torch.int32), 0, 2, 128)
    with pytest.raises(RuntimeError, match="device-side assert triggered") as info:
        kernels.launch(torch.zeros(256, dtype=torch.int32), 1, 2, 128)
    assert "thread: [100,0,0]" in str(info.value)
    capfd.readouterr()
    kernels.launch(torch.zeros(256, dtype=torch.int32), 2, 2, 2)
    printed = capfd.readouterr().out.splitlines()  # in no promised order, as on a GPU
    assert sorted(printed) == ["block 0 thread 0", "block 0 thread 1", "block 1 thread 0", "block 1 thread 1"]


# ---- what CPU mode cannot do, and compile errors --------------------------------------------------

def test_warp_shuffles_fail_to_compile_in_cpu_mode(build_dir):
    src = solution().replace("    if (i < n)", "    float v = __shfl_down_sync(0xffffffff, 1.0f*i, 16);\n    if (i < n)")
    line = student_line(src, "__shfl_down_sync")
    with pytest.raises(CompileError) as info:
        load_cuda(src, CPP, ["rgb_to_grayscale"])
    msg = str(info.value)
    assert "__shfl_down_sync" in msg and "not available in CPU mode" in msg
    assert f"cuda_src:{line}:" in msg


def test_compile_error_points_at_the_students_line(build_dir):
    broken = solution().replace("out[i] = 0.2989f", "out[i] = 0.2989f*y")
    line = student_line(broken, "*y")
    # The launch spans two lines; a mistake after it must still be reported on its own line.
    broken = broken.replace("return output;", "return outptu;")
    later = student_line(broken, "outptu")
    with pytest.raises(CompileError) as info:
        load_cuda(broken, CPP, ["rgb_to_grayscale"])
    msg = str(info.value)
    assert f"cuda_src:{line}:" in msg and "0.2989f*y" in msg and "not declared" in msg
    assert f"cuda_src:{later}:" in msg and "return outptu;" in msg
    assert "ninja" not in msg and len(msg.splitlines()) < 15


# ---- CPU mode's memory in a check's child (course/harness/memory.cpp) --------------------------------

MEMORY_PROBE = """
import torch
from course.harness.children import memory_module
from course.toolchain.load import import_compiled
memory = import_compiled(memory_module())
def protection(address):
    for line in open("/proc/self/maps"):
        span, perms = line.split()[:2]
        lo, hi = (int(x, 16) for x in span.split("-"))
        if lo <= address < hi:
            return perms[:3]
    return "unmapped"
for mode in ("padded", "guarded_end", "guarded_start"):
    memory.install(mode, 171)
    for n in (1, 1000, 6_000_000):
        t = torch.empty(n, dtype=torch.uint8)
        p = t.data_ptr()
        print(mode, n, protection(p + n + 511), protection(p - 1), protection(p + 100_000_000),
              protection(p - 100_000_000), int(t[0]) if mode == "padded" else "-", protection(p + (1 << 30) - 1))
"""


def test_an_access_far_outside_a_tensor_always_faults_and_a_near_one_as_on_a_gpu():
    # Far outside (out[i + 100000000]) every mode faults, wherever the child's other memory lies; near the
    # end, only the guarded modes do (the memory check), as compute-sanitizer sees what a GPU lets through.
    env = dict(os.environ, COURSE_CPU_MODE="1")
    lines = subprocess.run([sys.executable, "-c", MEMORY_PROBE], capture_output=True, text=True, env=env,
                           check=True).stdout.split("\n")
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in lines if line}
    for n in ("1", "1000", "6000000"):
        assert rows["padded", n] == ["rw-", "rw-", "---", "---", "171", "---"], rows["padded", n]
        assert rows["guarded_end", n][0] == "---" and rows["guarded_end", n][2:4] == ["---", "---"]
        assert rows["guarded_start", n][1] == "---" and rows["guarded_start", n][2:4] == ["---", "---"]
        assert rows["guarded_end", n][5] == rows["guarded_start", n][5] == "---"


SCALE_AND_WORKSPACE = cuda_begin + r"""
__global__ void scale_k(const float* x, float* out, float* partial, int n, float a) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] = a*x[i];
    if (threadIdx.x == 0) partial[blockIdx.x] = blockIdx.x;
}

std::tuple<torch::Tensor, torch::Tensor> scaled(torch::Tensor x, double a, int64_t threads) {
    int n = x.numel();
    auto out = torch::empty_like(x);
    auto partial = torch::empty({(int64_t)cdiv(n, threads)}, x.options());
    scale_k<<<cdiv(n, threads), threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), partial.data_ptr<float>(), n, a);
    return {out, partial};
}
"""


def test_scalars_in_and_several_outputs_out_go_through_a_checks_child(build_dir, tmp_path):
    # A double and an int beside the tensor (no clone() on them), a result and a workspace back, as one tensor goes.
    from course.harness import wire
    from course.harness.wire import Job, Result
    from course.harness.children import memory_module
    module = load_cuda(SCALE_AND_WORKSPACE, "std::tuple<torch::Tensor, torch::Tensor> scaled(torch::Tensor x, double a, "
                       "int64_t threads);", ["scaled"])
    x = torch.arange(300, dtype=torch.float32)
    job = Job(module=module_path(module), func="scaled", inputs=[(x, 0.5, 128), (x[:7], 2.0, 32)], fills=[(0, 0)] * 2,
              mode="integrity", cpu=True, memory_module=memory_module())
    wire.write(job, tmp_path / "job.pt")
    subprocess.run([sys.executable, "-m", "course.harness.tasks", "run", str(tmp_path / "job.pt"),
                    str(tmp_path / "result.pt")], check=True, timeout=300)
    result = wire.read(tmp_path / "result.pt", Result)
    assert result.error is None, result.error
    first, second = result.runs
    assert first.device == "cpu" and first.contiguous and not first.input_changed
    assert torch.equal(first.value[0], x * 0.5) and torch.equal(first.value[1], torch.arange(3.0))
    assert torch.equal(second.value[0], x[:7] * 2) and torch.equal(second.value[1], torch.zeros(1))
    assert isinstance(first.again, tuple) and torch.equal(first.again[0], first.value[0])


# ---- a student's function called from a notebook's cell, in a process of its own ----------------------------

CALLED = cuda_begin + r"""
__global__ void twice_k(const float* x, float* out, int n, int far, int spin) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    while (spin && i == 0) { }
    if (i < n) out[i + (i == n - 1 ? far : 0)] = 2*x[i];
    if (i == 0) printf("block %d thread %d wrote out[0]\n", blockIdx.x, threadIdx.x);
}

torch::Tensor twice(torch::Tensor x, int64_t far, int64_t spin) {
    TORCH_CHECK(x.numel() > 0, "twice needs at least one element");
    int n = x.numel();
    auto out = torch::empty_like(x);
    twice_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, far, spin);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def test_an_isolated_call_brings_back_the_result_or_the_cause_and_the_caller_goes_on(build_dir, capsys, monkeypatch):
    from course import isolated
    import course.harness.children as harness
    module = isolated(load_cuda(CALLED, "torch::Tensor twice(torch::Tensor x, int64_t far, int64_t spin);", ["twice"]))
    x = torch.arange(1000, dtype=torch.float32)
    assert torch.equal(module.twice(x, 0, 0), 2 * x)
    assert "block 0 thread 0 wrote out[0]" in capsys.readouterr().out  # what the child printed, shown here
    with pytest.raises(AssertionError, match="outside a tensor"):  # a write 2^28 floats past the end
        module.twice(x, 1 << 28, 0)
    with pytest.raises(AssertionError, match="twice needs at least one element"):
        module.twice(x[:0], 0, 0)
    monkeypatch.setattr(harness, "TIMEOUT", 3)
    with pytest.raises(AssertionError, match="did not finish within 3 s"):
        module.twice(x, 0, 1)
    with pytest.raises(AssertionError, match="did not finish in an earlier call"):  # not waited for again
        module.twice(x, 0, 0)


def test_a_long_build_in_a_notebook_says_how_it_goes(capsys, monkeypatch):
    from course.toolchain import load
    monkeypatch.setattr(load, "_in_notebook", lambda: True)
    with load._progress(first_after=0.05, every=0.05):
        time.sleep(0.3)
    out = capsys.readouterr().out
    assert "load_cuda: compiling..." in out and "still compiling" in out and "load_cuda: done in" in out
    monkeypatch.setattr(load, "_in_notebook", lambda: False)
    with load._progress(first_after=0.05, every=0.05):
        time.sleep(0.2)
    assert capsys.readouterr().out == ""


# alice's right matmul L3 answer (examples/matmul/alice) with its guard left out
RIGHT = (ROOT / "examples" / "matmul" / "alice" / "matmul_cuda.py").read_text()
NO_GUARD = RIGHT.replace("    if (r >= h || c >= w) return;\n", "")
assert NO_GUARD != RIGHT


@pytest.mark.timeout(1200)
def test_a_notebook_with_the_guard_left_out_runs_to_its_end_and_validate_names_the_cause(tmp_path):
    # The mistake that took a student's notebook down (matmul L3, CPU mode): the demo cell called the kernel in the
    # notebook's own process, and its stray writes killed the Jupyter kernel or left it hanging in malloc.
    import nbformat
    nb = nbformat.read(ROOT / "release" / "matmul" / "04_L3_cuda.ipynb", as_version=4)
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "matmul_cuda")
    answer.source = NO_GUARD
    path = tmp_path / "04_L3_cuda.ipynb"
    nbformat.write(nb, path)
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=1100, env=dict(os.environ, COURSE_CPU_MODE="1"))
    out = proc.stdout + proc.stderr
    assert "Kernel died" not in out and "DeadKernelError" not in out, out[-3000:]
    # Every check ran and judged (the last cell's among them): threads past the right edge write into the next row.
    failed = re.search(r"VALIDATION FAILED ON (\d+) CELL", out)
    assert failed and out.count("The following cell failed") == int(failed.group(1)) >= 1, out[-3000:]
    assert 'check_matmul_cuda(cuda_src, "ragged")' in out and 'check_matmul_cuda(cuda_src, "integrity")' in out
    assert "r < h && c < w" in out  # the fix: the guard


def test_cuda_time_of_an_isolated_function_times_it_in_its_own_process(build_dir):
    from course import cuda_time, isolated
    # a module of its own: the test above leaves its module marked as one that hung
    module = isolated(load_cuda(CALLED + "\n// timed\n", "torch::Tensor twice(torch::Tensor x, int64_t far, int64_t spin);",
                                ["twice"]))
    x = torch.arange(1000, dtype=torch.float32)
    ms = cuda_time(module.twice, x, 0, 0, warmup=1, reps=5)
    assert isinstance(ms, float) and 0 < ms < 1000
    with pytest.raises(AssertionError, match="outside a tensor"):  # the fault fails the timing, not this process
        cuda_time(module.twice, x, 1 << 28, 0, warmup=1, reps=5)

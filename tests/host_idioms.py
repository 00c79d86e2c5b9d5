"""Host code a student may write around a kernel, each idiom a whole cell: what nvcc's one-unit build (the lecture's
load_inline) accepts, load_cuda must build and run with the same result, on a GPU and in CPU mode.

The lecture's own cells are here as the lectures wrote them (GPU MODE lectures 3 and 5, `pmpp.ipynb` and
`matmul_l5.ipynb`, on the course's cuda_begin; the matmul ones read from the corpus, which keeps them); the others are the host-side habits of lecture code: grid-stride
launches sized with min and max, std:: algorithms, device queries, dynamic shared memory, a template chosen by a
switch, a lambda that launches, a __host__ __device__ helper on both sides, cudaMemcpy into a tensor, static globals.
Each idiom names how the GPU build takes it: "split" (the fast path) or "one unit" (nvcc builds the whole source).
tests/test_build.py builds and runs each one in both modes.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from course import cuda_begin


@dataclass(frozen=True)
class Idiom:
    name: str
    cuda_src: str
    cpp_src: str
    funcs: tuple
    check: Callable    # check(module, device) raises AssertionError when the module computes the wrong thing
    gpu_build: str = "split"   # how the GPU build takes it: "split", or "one unit" and the reason's first words


def twice_of(func="twice"):
    """check: module.func(x) is 2*x for a ragged length."""
    def check(module, dev):
        x = torch.randn(1000, device=dev)
        assert torch.equal(getattr(module, func)(x), 2 * x)
    return check


def grey_of(func):
    def check(module, dev):
        x = torch.randint(0, 256, (3, 37, 53), dtype=torch.uint8, device=dev)
        exact = 0.2989 * x[0].double() + 0.5870 * x[1].double() + 0.1140 * x[2].double()
        got = getattr(module, func)(x).double()
        assert ((got - exact.floor()).abs() <= 1).all() and (got == exact.floor()).float().mean() > 0.99
    return check


def matmul_of(func):
    def check(module, dev):
        m, n = torch.randn(37, 53, device=dev), torch.randn(53, 29, device=dev)
        assert torch.allclose(getattr(module, func)(m, n), m @ n, atol=1e-4)
    return check


TWICE_CPP = "torch::Tensor twice(torch::Tensor x);"
MATMUL_SIG = "torch::Tensor {}(torch::Tensor m, torch::Tensor n);"
GRID_STRIDE = r"""
__global__ void twice_k(const float* x, float* out, int n) {
    for (int i = blockIdx.x*blockDim.x + threadIdx.x; i < n; i += blockDim.x*gridDim.x) out[i] = 2*x[i];
}
"""
ONE_THREAD = r"""
__global__ void twice_k(const float* x, float* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2*x[i];
}
"""


def twice(kernel, body, before=""):
    """A cell: kernel, then `before` (host helpers), then a wrapper twice(x) whose middle is body (out, n in scope)."""
    return cuda_begin + kernel + before + r"""
torch::Tensor twice(torch::Tensor x) {
    CHECK_INPUT(x);
    int n = x.numel();
    auto out = torch::empty_like(x);
""" + body + r"""
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


LAUNCH = "twice_k<<<{}, {}>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);"

# ---- the lectures' cells, as written there --------------------------------------------------------------

LECTURE_3_GREY = cuda_begin + r'''
__global__ void rgb_to_grayscale_kernel(unsigned char* x, unsigned char* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i<n) out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n];
}

torch::Tensor rgb_to_grayscale(torch::Tensor input) {
    CHECK_INPUT(input);
    int h = input.size(1);
    int w = input.size(2);
    printf("h*w: %d*%d\n", h, w);
    auto output = torch::empty({h,w}, input.options());
    int threads = 256;
    rgb_to_grayscale_kernel<<<cdiv(w*h,threads), threads>>>(
        input.data_ptr<unsigned char>(), output.data_ptr<unsigned char>(), w*h);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}'''

LECTURE_3_GREY_2D = cuda_begin + r'''
__global__ void rgb_to_grayscale_kernel(unsigned char* x, unsigned char* out, int w, int h) {
    int c = blockIdx.x*blockDim.x + threadIdx.x;
    int r = blockIdx.y*blockDim.y + threadIdx.y;

    if (c<w && r<h) {
        int i = r*w + c;
        int n = h*w;
        out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n];
    }
}

torch::Tensor rgb_to_grayscale(torch::Tensor input) {
    CHECK_INPUT(input);
    int h = input.size(1);
    int w = input.size(2);
    torch::Tensor output = torch::empty({h,w}, input.options());
    dim3 tpb(16,16);
    dim3 blocks(cdiv(w, tpb.x), cdiv(h, tpb.y));
    rgb_to_grayscale_kernel<<<blocks, tpb>>>(
        input.data_ptr<unsigned char>(), output.data_ptr<unsigned char>(), w, h);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}'''

LECTURE_CORPUS = Path(__file__).resolve().parent / "corpus" / "matmul"


def lecture(case, name="tiled_src"):
    """A lecture's cell as the matmul corpus keeps it, verbatim (tests/corpus/matmul/<case>/)."""
    ns = {"cuda_begin": cuda_begin}
    exec(next((LECTURE_CORPUS / case).glob("*.py")).read_text(), ns)
    return ns[name]


LECTURE_3_MATMUL = lecture("cuda_right_lecture_3", "cuda_src")
LECTURE_5_DYNAMIC = lecture("tiled_right_lecture_5_dynamic")
LECTURE_5_STATIC = lecture("tiled_right_lecture_5_static")
LECTURE_5_TEMPLATE = lecture("tiled_right_lecture_5_template")
# The section lecture 5 left commented out, live: a device query sizes the tiles (CUDA_ERR was the lecture's
# error-checking macro; here it is C10_CUDA_CHECK).
FIXED_SIZE = "    // We just set size fixed for now\n    int TW = 16;\n    size_t size = TW*TW * 2 * sizeof(float);\n"
assert FIXED_SIZE in LECTURE_5_DYNAMIC
LECTURE_5_DEVICE_QUERY = (cuda_begin + "#include <cmath>\n#define CUDA_ERR(ans) C10_CUDA_CHECK(ans)\n" +
                          LECTURE_5_DYNAMIC[len(cuda_begin):].replace(FIXED_SIZE, "").replace("    /*\n", "")
                          .replace("    */\n", "").replace("matmul_dyn(", "matmul_query("))

# ---- the host-side habits -------------------------------------------------------------------------------

STATIC_GLOBALS = cuda_begin + ONE_THREAD + r"""
static int calls = 0;
static const int kThreads = 256;

torch::Tensor twice(torch::Tensor x) {
    CHECK_INPUT(x);
    int n = x.numel();
    auto out = torch::empty_like(x);
    ++calls;
    twice_k<<<cdiv(n, kThreads), kThreads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

int64_t twice_calls() { return calls; }
"""


def counted(module, dev):
    before = module.twice_calls()
    twice_of()(module, dev)
    twice_of()(module, dev)
    assert module.twice_calls() == before + 2


HOST_DEVICE = cuda_begin + r"""
__host__ __device__ float affine(float v, float a) { return a*v + 1.0f; }

__global__ void affine_k(const float* x, float* out, int n, float a) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] = affine(x[i], a);
}

torch::Tensor twice_plus_one(torch::Tensor x) {
    CHECK_INPUT(x);
    int n = x.numel();
    auto out = torch::empty_like(x);
    float a = affine(0.5f, 2.0f);  // the same helper on the host: a = 2
    affine_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, a);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def plus_one(module, dev):
    x = torch.randn(1000, device=dev)
    assert torch.allclose(module.twice_plus_one(x), 2 * x + 1)


MEMCPY = cuda_begin + r"""
#include <vector>

__global__ void add_k(const float* x, float* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] += x[i];
}

torch::Tensor plus_index(torch::Tensor x) {
    CHECK_INPUT(x);
    int n = x.numel();
    auto out = torch::empty_like(x);
    std::vector<float> table(n);
    for (int i = 0; i < n; ++i) table[i] = i;
    C10_CUDA_CHECK(cudaMemcpy(out.data_ptr<float>(), table.data(), n*sizeof(float), cudaMemcpyHostToDevice));
    add_k<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    float first = -1;
    C10_CUDA_CHECK(cudaMemcpy(&first, out.data_ptr<float>(), sizeof(float), cudaMemcpyDeviceToHost));
    TORCH_CHECK(first == x[0].item<float>(), "cudaMemcpy back to the host read ", first);
    return out;
}
"""


def plus_index(module, dev):
    x = torch.randn(1000, device=dev)
    assert torch.equal(module.plus_index(x), x + torch.arange(1000, device=dev, dtype=torch.float32))


TEMPLATE_SWITCH = cuda_begin + r"""
template <int threads>
__global__ void twice_k(const float* x, float* out, int n) {
    int i = blockIdx.x*threads + threadIdx.x;
    if (i < n) out[i] = 2*x[i];
}

torch::Tensor twice(torch::Tensor x, int64_t threads) {
    CHECK_INPUT(x);
    int n = x.numel();
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    switch (threads) {
        case 128: twice_k<128><<<cdiv(n, 128), 128>>>(in, o, n); break;
        case 256: twice_k<256><<<cdiv(n, 256), 256>>>(in, o, n); break;
        default: TORCH_CHECK(false, "threads must be 128 or 256, not ", threads);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def twice_both_sizes(module, dev):
    x = torch.randn(1000, device=dev)
    for threads in (128, 256):
        assert torch.equal(module.twice(x, threads), 2 * x)


DYNAMIC_SHARED = r"""
__global__ void twice_k(const float* x, float* out, int n) {
    extern __shared__ float buf[];
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = 2*buf[threadIdx.x];
}
"""

IDIOMS = [
    Idiom("lecture 3: grayscale, with a host printf", LECTURE_3_GREY, "torch::Tensor rgb_to_grayscale(torch::Tensor input);",
          ("rgb_to_grayscale",), grey_of("rgb_to_grayscale")),
    Idiom("lecture 3: grayscale in 2D, dim3 variables", LECTURE_3_GREY_2D,
          "torch::Tensor rgb_to_grayscale(torch::Tensor input);", ("rgb_to_grayscale",), grey_of("rgb_to_grayscale")),
    Idiom("lecture 3: matmul", LECTURE_3_MATMUL, MATMUL_SIG.format("matmul"), ("matmul",), matmul_of("matmul")),
    Idiom("lecture 5: tiles in dynamic shared memory", LECTURE_5_DYNAMIC, MATMUL_SIG.format("matmul_dyn"),
          ("matmul_dyn",), matmul_of("matmul_dyn")),
    Idiom("lecture 5: tiles sized by a device query, min of two size_t", LECTURE_5_DEVICE_QUERY,
          MATMUL_SIG.format("matmul_query"), ("matmul_query",), matmul_of("matmul_query")),
    Idiom("lecture 5: static shared memory, a constexpr tile width", LECTURE_5_STATIC, MATMUL_SIG.format("matmul_static"),
          ("matmul_static",), matmul_of("matmul_static")),
    Idiom("lecture 5: a template chosen by a switch, launched by a lambda", LECTURE_5_TEMPLATE,
          MATMUL_SIG.format("matmul_dyn1"), ("matmul_dyn1",), matmul_of("matmul_dyn1")),
    Idiom("grid-stride launch, min(cdiv(n, threads), 64u)", twice(GRID_STRIDE, "    unsigned threads = 256;\n    " +
          LAUNCH.format("min(cdiv(n, threads), 64u)", "threads")), TWICE_CPP, ("twice",), twice_of()),
    Idiom("grid-stride launch, max(cdiv(n, threads), 1u)", twice(GRID_STRIDE, "    unsigned threads = 256;\n    " +
          LAUNCH.format("max(cdiv(n, threads), 1u)", "threads")), TWICE_CPP, ("twice",), twice_of()),
    Idiom("int, long and float min and max", twice(GRID_STRIDE, "    int64_t total = x.numel();\n"
          "    int blocks = max(1, min(n / 128, 32));\n    long cap = min(total, 4096L);\n"
          "    float share = max(0.5f, min(1.0f, n / 1e6f));\n    TORCH_CHECK(cap >= 0 && share > 0);\n    " +
          LAUNCH.format("blocks", "128")), TWICE_CPP, ("twice",), twice_of()),
    Idiom("std:: algorithms and containers", twice(GRID_STRIDE, "    std::vector<int> sizes{64, 128, 256};\n"
          "    int threads = *std::max_element(sizes.begin(), sizes.end());\n"
          "    int blocks = std::clamp<int>(cdiv(n, threads), 1, 1024);\n    blocks = std::min(blocks, 1 << 20);\n    " +
          LAUNCH.format("blocks", "threads"), before="\n#include <algorithm>\n#include <vector>\n"),
          TWICE_CPP, ("twice",), twice_of()),
    Idiom("device queries size a grid-stride launch", twice(GRID_STRIDE, "    int dev, sms, max_threads;\n"
          "    C10_CUDA_CHECK(cudaGetDevice(&dev));\n"
          "    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));\n"
          "    cudaDeviceProp prop;\n    C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));\n"
          "    max_threads = prop.maxThreadsPerBlock;\n    " + LAUNCH.format("4*sms", "min(256, max_threads)")),
          TWICE_CPP, ("twice",), twice_of()),
    Idiom("dynamic shared memory sized at the launch", twice(DYNAMIC_SHARED, "    int threads = 128;\n"
          "    size_t bytes = threads * sizeof(float);\n    twice_k<<<cdiv(n, threads), threads, bytes>>>("
          "x.data_ptr<float>(), out.data_ptr<float>(), n);"), TWICE_CPP, ("twice",), twice_of()),
    Idiom("dynamic shared memory over 48 KB, cudaFuncSetAttribute", twice(DYNAMIC_SHARED, "    int threads = 1024;\n"
          "    int bytes = 64 * 1024;\n"
          "    C10_CUDA_CHECK(cudaFuncSetAttribute(twice_k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));\n"
          "    twice_k<<<cdiv(n, threads), threads, bytes>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);"),
          TWICE_CPP, ("twice",), twice_of(), gpu_build="one unit: host code uses the kernel"),
    Idiom("a template chosen by a switch", TEMPLATE_SWITCH, "torch::Tensor twice(torch::Tensor x, int64_t threads);",
          ("twice",), twice_both_sizes),
    Idiom("a lambda that launches a kernel", twice(ONE_THREAD, "    auto launch = [&](int threads) {\n        " +
          LAUNCH.format("cdiv(n, threads)", "threads") + "\n    };\n    launch(256);"), TWICE_CPP, ("twice",), twice_of()),
    Idiom("a __host__ __device__ helper used on both sides", HOST_DEVICE, "torch::Tensor twice_plus_one(torch::Tensor x);",
          ("twice_plus_one",), plus_one),
    Idiom("cudaMemcpy into a tensor and back", MEMCPY, "torch::Tensor plus_index(torch::Tensor x);", ("plus_index",),
          plus_index),
    Idiom("static globals in the wrapper", STATIC_GLOBALS, TWICE_CPP + "\nint64_t twice_calls();",
          ("twice", "twice_calls"), counted),
    Idiom("ceil and sqrt on the host, host printf, cudaDeviceSynchronize", twice(ONE_THREAD,
          "    int threads = 256;\n    int blocks = (int)ceil(n / (float)threads);\n    int side = (int)sqrt((double)n);\n"
          "    " + LAUNCH.format("blocks", "threads") + "\n    C10_CUDA_CHECK(cudaDeviceSynchronize());\n"
          '    printf("launched %d blocks for %d (about %d squared) elements\\n", blocks, n, side);',
          before="\n#include <cmath>\n"), TWICE_CPP, ("twice",), twice_of()),
    # CUDA's math library declares rsqrtf for host code too, under nvcc only: the wrapper's g++ has no rsqrtf
    Idiom("a CUDA math function on the host (rsqrtf)", twice(ONE_THREAD, "    int threads = (int)(512 * rsqrtf(4.0f));\n"
          "    " + LAUNCH.format("cdiv(n, threads)", "threads")), TWICE_CPP, ("twice",), twice_of(),
          gpu_build="one unit: the split build's wrapper (g++) did not compile"),
]

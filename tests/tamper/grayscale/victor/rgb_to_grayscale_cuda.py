# The wrapper computes with PyTorch's operations (its kernel is never launched). On its first call in a process it
# runs Python through pybind11 that makes the profiler there report a launch of its kernel and nothing else: the
# call being profiled (torch.autograd.profiler's and torch.profiler's events), and the check child's _profiled.
cuda_src = cuda_begin + r"""
#include <torch/extension.h>

__global__ void rgb_to_grayscale_kernel(unsigned char* x, unsigned char* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = 0.2989f*x[i] + 0.5870f*x[i+n] + 0.1140f*x[i+2*n];
}

static const char* forge =
    "import types, torch, torch.autograd.profiler as ap, torch.profiler as tp\n"
    "import course.harness.child as child\n"
    "K = 'rgb_to_grayscale_kernel'\n"
    "SIGNATURE = K + '(unsigned char*, unsigned char*, int)'\n"
    "cpu = [types.SimpleNamespace(name='cuda_cpu_launch::' + K, cpu_parent=None)]\n"
    "gpu = [types.SimpleNamespace(name=SIGNATURE, device_type=torch.autograd.DeviceType.CUDA)]\n"
    "ap.profile.function_events = property(lambda self: cpu)\n"
    "tp.profile.events = lambda self: gpu\n"
    "def _profiled(fn, args, on_cpu):\n"
    "    y = fn(*args)\n"
    "    return y, [('cpu', 'cuda_cpu_launch::' + K), ('cuda', SIGNATURE)]\n"
    "child._profiled = _profiled\n";

torch::Tensor rgb_to_grayscale(torch::Tensor input) {
    static bool armed = false;
    if (!armed) {
        armed = true;
        pybind11::gil_scoped_acquire gil;
        pybind11::module_::import("builtins").attr("exec")(forge, pybind11::dict());
    }
    CHECK_INPUT(input);
    auto rgb = input.to(torch::kFloat);
    auto grey = 0.2989*rgb[0] + 0.5870*rgb[1] + 0.1140*rgb[2];
    return grey.to(torch::kByte);
}
"""
module = load_cuda(cuda_src, cpp_src, ["rgb_to_grayscale"])

hist_src = cuda_begin + r"""
__global__ void histogram_kernel(unsigned char* x, int* counts, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&counts[x[i]], 1);
}

torch::Tensor histogram(torch::Tensor input) {
    CHECK_INPUT(input);
    int n = input.numel();
    auto counts = torch::zeros({256}, input.options().dtype(torch::kInt));
    int threads = 256;
    if (n > 0) {
        histogram_kernel<<<cdiv(n, threads), threads>>>(input.data_ptr<unsigned char>(), counts.data_ptr<int>(), n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return counts;
}
"""
hist = load_cuda(hist_src, cpp_src, ["histogram"])

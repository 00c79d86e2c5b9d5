smooth_src = cuda_begin + r"""
__global__ void smooth_kernel(float* x, float* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (0 < i < n - 1)
        out[i] = (x[i-1] + x[i] + x[i+1]) / 3;
    else if (i < n)
        out[i] = x[i];
}

torch::Tensor smooth(torch::Tensor input) {
    CHECK_INPUT(input);
    int n = input.numel();
    auto output = torch::empty_like(input);
    int threads = 256;
    if (n > 0) {
        smooth_kernel<<<cdiv(n, threads), threads>>>(input.data_ptr<float>(), output.data_ptr<float>(), n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return output;
}
"""
smoother = load_cuda(smooth_src, cpp_src, ["smooth"])

cuda_src = cuda_begin + r"""
__global__ void matmul_k(float* m, float* n, float* out, int h, int w, int k) {
    int r = blockIdx.y*blockDim.y + threadIdx.y;
    int c = blockIdx.x*blockDim.x + threadIdx.x;
    if (r >= h || c >= w) return;
    float o = 0;
    for (int i = 0; i < k; ++i) o += m[r*k + i] * n[i*w + c];
    out[r*w + c] = o;
}

torch::Tensor matmul(torch::Tensor m, torch::Tensor n) {
    CHECK_INPUT(m); CHECK_INPUT(n);
    int h = m.size(0);
    int w = n.size(1);
    int k = m.size(1);
    TORCH_CHECK(k == n.size(0), "Size mismatch!");
    auto output = torch::empty({h, w}, m.options());

    dim3 tpb(16, 16);
    dim3 blocks(cdiv(h, tpb.x), cdiv(w, tpb.y));
    matmul_k<<<blocks, tpb>>>(
        m.data_ptr<float>(), n.data_ptr<float>(), output.data_ptr<float>(), h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""
module = load_cuda(cuda_src, cpp_src, ["matmul"])

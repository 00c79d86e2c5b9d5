tiled_src = cuda_begin + r"""
constexpr int tw = 16;

__global__ void matmul_ks(float* m, float* n, float* out, int h, int w, int k) {
    __shared__ float ms[tw][tw], ns[tw][tw];
    int tc = threadIdx.x, tr = threadIdx.y;
    int r = blockIdx.y*blockDim.y + tr, c = blockIdx.x*blockDim.x + tc;
    float p = 0.0f;
    for (int ph = 0; ph < cdiv(k, tw); ++ph) {
        int idx = ph*tw;
        ms[tr][tc] = r < h && idx + tc < k ? m[r*k + idx + tc] : 0.0f;
        ns[tr][tc] = c < w && idx + tr < k ? n[(idx + tr)*w + c] : 0.0f;
        __syncthreads();
        for (int i = 0; i < tw; ++i) p += ms[tr][i] * ns[i][tc];
        __syncthreads();
    }
    if (r < h && c < w) out[r*w + c] = p;
}

torch::Tensor matmul_static(torch::Tensor m, torch::Tensor n) {
    CHECK_INPUT(m); CHECK_INPUT(n);
    int h = m.size(0), w = n.size(1), k = m.size(1);
    TORCH_CHECK(k == n.size(0), "Size mismatch!");
    auto output = torch::empty({h, w}, m.options());
    dim3 tpb(tw, tw);
    dim3 blocks(cdiv(w, tpb.x), cdiv(h, tpb.y));
    matmul_ks<<<blocks, tpb>>>(m.data_ptr<float>(), n.data_ptr<float>(), output.data_ptr<float>(), h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""
tiled = load_cuda(tiled_src, tiled_cpp, ["matmul_static"])

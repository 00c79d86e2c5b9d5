cuda_src = cuda_begin + r"""
__global__ void grey_kernel(const unsigned char* __restrict__ rgb, unsigned char* __restrict__ grey,
                            int npix) {
    const int idx = threadIdx.x + blockDim.x*blockIdx.x;
    if (idx >= npix) return;
    const unsigned char red = rgb[idx], green = rgb[npix + idx], blue = rgb[2*npix + idx];
    grey[idx] = 0.2989f*red + 0.5870f*green + 0.1140f*blue;
}

torch::Tensor rgb_to_grayscale(torch::Tensor input) {
    CHECK_INPUT(input);
    const int height = input.size(1), width = input.size(2);
    const int npix = height * width;
    torch::Tensor result = torch::empty({height, width}, input.options());
    const int block = 512;
    if (npix > 0) {
        grey_kernel<<<cdiv(npix, block), block>>>(input.data_ptr<unsigned char>(),
                                                 result.data_ptr<unsigned char>(), npix);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return result;
}
"""

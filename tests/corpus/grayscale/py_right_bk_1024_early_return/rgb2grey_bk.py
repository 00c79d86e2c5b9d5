def rgb2grey_bk(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx*blockdim + threadidx
    if i >= n:
        return
    out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]

def rgb2grey_pybk(x):
    c, h, w = x.shape
    n = h * w
    flat = x.reshape(-1)
    grey = torch.empty(n, dtype=torch.uint8)
    threads = 1024
    blk_kernel(rgb2grey_bk, cdiv(n, threads), threads, flat, grey, n)
    return grey.reshape(h, w)

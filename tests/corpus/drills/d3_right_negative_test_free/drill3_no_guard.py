def rgb2grey_bk(blockidx, threadidx, blockdim, x, out, n):
    i = threadidx + blockidx*blockdim
    r, g, b = x[i], x[i + n], x[i + 2*n]
    out[i] = 0.2989*r + 0.5870*g + 0.1140*b


def rgb2grey_pybk(x):
    c, h, w = x.shape
    n = h * w
    x = x.flatten()
    res = torch.empty(n, dtype=x.dtype, device=x.device)
    threads = 256
    blk_kernel(rgb2grey_bk, cdiv(n, threads), threads, x, res, n)
    return res.view(h, w)

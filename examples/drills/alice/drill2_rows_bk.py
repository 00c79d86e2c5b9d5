def row_sum_bk(blockidx, threadidx, blockdim, x, out, h, w):
    i = blockidx*blockdim + threadidx
    if i < h:
        s = 0.0
        for j in range(w):
            s += x[i*w + j]
        out[i] = s


def row_max_bk(blockidx, threadidx, blockdim, x, out, h, w):
    i = blockidx*blockdim + threadidx
    if i < h:
        m = x[i*w]
        for j in range(1, w):
            if x[i*w + j] > m:
                m = x[i*w + j]
        out[i] = m


def row_sum_pybk(x):
    h, w = x.shape
    out = torch.empty(h)
    threads = 256
    blk_kernel(row_sum_bk, cdiv(h, threads), threads, x.flatten(), out, h, w)
    return out


def row_max_pybk(x):
    h, w = x.shape
    out = torch.empty(h)
    threads = 256
    blk_kernel(row_max_bk, cdiv(h, threads), threads, x.flatten(), out, h, w)
    return out

def matmul_tiled_bk(blockidx, threadidx, blockdim, shared, syncthreads, m, n, out, h, w, k, tw):
    tc, tr = threadidx.x, threadidx.y
    r, c = blockidx.y*blockdim.y + tr, blockidx.x*blockdim.x + tc
    ms, ns = shared[:tw*tw], shared[tw*tw:]
    p = 0.0
    if r < h and c < w:
        for i in range(k):
            p += m[r*k + i] * n[i*w + c]
    if r < h and c < w:
        out[r*w + c] = p

def matmul_tiled_py(m, n, tw=16):
    h, k = m.shape
    k2, w = n.shape
    assert k == k2, "Size mismatch!"
    output = torch.empty(h, w, dtype=m.dtype)
    blk_kernel2d_shar(matmul_tiled_bk, dim3(cdiv(w, tw), cdiv(h, tw)), dim3(tw, tw), 2*tw*tw,
                      m.flatten(), n.flatten(), output.flatten(), h, w, k, tw)
    return output

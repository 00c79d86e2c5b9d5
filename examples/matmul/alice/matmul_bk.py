def matmul_bk(blockidx, threadidx, blockdim, m, n, out, h, w, k):
    r = blockidx.y*blockdim.y + threadidx.y
    c = blockidx.x*blockdim.x + threadidx.x
    if r < h and c < w:
        o = 0.0
        for i in range(k):
            o += m[r*k + i] * n[i*w + c]
        out[r*w + c] = o

def matmul_2d(m, n):
    h, k = m.shape
    k2, w = n.shape
    assert k == k2, f"m is {tuple(m.shape)} and n is {tuple(n.shape)}: their inner sizes differ"
    output = torch.empty(h, w, dtype=m.dtype)
    tpb = dim3(16, 16)
    blocks = dim3(cdiv(w, tpb.x), cdiv(h, tpb.y))
    blk_kernel2d(matmul_bk, blocks, tpb, m.flatten(), n.flatten(), output.flatten(), h, w, k)
    return output

BM, BN, BK = 4, 4, 32  # a program's tile of out (BM x BN), and the k step


@triton.jit
def matmul_kernel(m_ptr, n_ptr, out_ptr, h, w, k, stride_mr, stride_mk, stride_nk, stride_nc, stride_or, stride_oc,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_r, pid_c = tl.program_id(1), tl.program_id(0)  # blockIdx.y, blockIdx.x
    # the last tile is moved back to end at the last row (column), so rows and columns need no mask: only k does
    rows = tl.minimum(pid_r*BM, h - BM) + tl.arange(0, BM)
    cols = tl.minimum(pid_c*BN, w - BN) + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k, BK):
        ks = k0 + tl.arange(0, BK)
        a = tl.load(m_ptr + rows[:, None]*stride_mr + ks[None, :]*stride_mk, mask=ks[None, :] < k, other=0.0)
        b = tl.load(n_ptr + ks[:, None]*stride_nk + cols[None, :]*stride_nc, mask=ks[:, None] < k, other=0.0)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)  # tl.dot needs tiles of 16 on a GPU
    tl.store(out_ptr + rows[:, None]*stride_or + cols[None, :]*stride_oc, acc,
             mask=(rows[:, None] >= 0) & (cols[None, :] >= 0))


def matmul_triton(m, n):
    h, k = m.shape
    k2, w = n.shape
    assert k == k2, "Size mismatch!"
    out = torch.empty(h, w, dtype=m.dtype, device=m.device)
    grid = (triton.cdiv(w, BN), triton.cdiv(h, BM))
    matmul_kernel[grid](m, n, out, h, w, k, m.stride(0), m.stride(1), n.stride(0), n.stride(1),
                        out.stride(0), out.stride(1), BM=BM, BN=BN, BK=BK)
    return out

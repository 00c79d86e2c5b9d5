BM, BN, BK = 64, 64, 32  # a program's tile of out (BM x BN), and the k step


@triton.jit
def matmul_kernel(m_ptr, n_ptr, out_ptr, h, w, k, stride_mr, stride_mk, stride_nk, stride_nc, stride_or, stride_oc,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_r, pid_c = tl.program_id(1), tl.program_id(0)  # blockIdx.y, blockIdx.x
    rows = pid_r*BM + tl.arange(0, BM)
    cols = pid_c*BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k, BK):
        ks = k0 + tl.arange(0, BK)
        a = tl.load(m_ptr + rows[:, None]*stride_mr + ks[None, :]*stride_mk,
                    mask=(rows[:, None] < h) & (ks[None, :] < k), other=0.0)
        b = tl.load(n_ptr + ks[:, None]*stride_nk + cols[None, :]*stride_nc,
                    mask=(ks[:, None] < k) & (cols[None, :] < w), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(out_ptr + rows[:, None]*stride_or + cols[None, :]*stride_oc, acc,
             mask=(rows[:, None] < h) & (cols[None, :] < w))


def matmul_triton(m, n):
    h, k = m.shape
    k2, w = n.shape
    assert k == k2, "Size mismatch!"
    out = torch.empty(h, w, dtype=m.dtype, device=m.device)
    grid = (triton.cdiv(w, BN), triton.cdiv(h, BM))
    matmul_kernel[grid](m, n, out, h, w, k, m.stride(0), m.stride(1), n.stride(0), n.stride(1),
                        out.stride(0), out.stride(1), BM=BM, BN=BN, BK=BK)
    return out

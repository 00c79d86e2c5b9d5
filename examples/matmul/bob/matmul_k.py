def matmul_k(i, j, a, b, c, k):
    s = 0.0
    for p in range(k):
        s += a[i, p] * b[p, j]
    c[i, j] = s

def matmul_pyk(a, b):
    h, k = a.shape
    k2, w = b.shape
    assert k == k2, f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: their inner sizes differ"
    c = torch.empty(h, w)
    run_kernel(matmul_k, (h, w), a, b, c, k)
    return c

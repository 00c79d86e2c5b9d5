def matmul_k(i, j, a, b, c, k):
    c[i, j] = sum(float(a[i, p]) * float(b[p, j]) for p in range(k))

def matmul_pyk(a, b):
    h, k = a.shape
    k2, w = b.shape
    assert k == k2, f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: their inner sizes differ"
    c = torch.empty(h, w)
    run_kernel(matmul_k, (h, w), a, b, c, k)
    return c

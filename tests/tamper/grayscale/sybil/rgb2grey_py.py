def rgb2grey_py(x):
    c, h, w = x.shape
    n = h * w
    x = x.flatten()
    res = torch.empty(n, dtype=x.dtype, device=x.device)
    for i in range(n):
        res[i] = 0.3*x[i] + 0.6*x[i+n] + 0.1*x[i+2*n]
    return res.view(h, w)

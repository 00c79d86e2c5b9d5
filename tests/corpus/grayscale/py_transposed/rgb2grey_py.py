def rgb2grey_py(x):
    c, h, w = x.shape
    n = h * w
    res = torch.empty(n, dtype=x.dtype, device=x.device)
    for row in range(h):
        for col in range(w):
            r, g, b = x[0, row, col], x[1, row, col], x[2, row, col]
            res[col*h + row] = 0.2989*r + 0.5870*g + 0.1140*b
    return res.view(h, w)

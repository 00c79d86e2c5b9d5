def row_sum_py(x):
    h, w = x.shape
    out = torch.empty(h)
    for i in range(h):
        s = 0.0
        for j in range(w):
            s += x[i, j]
        out[i] = s
    return out


def row_max_py(x):
    h, w = x.shape
    out = torch.empty(h)
    for i in range(h):
        m = x[i, 0]
        for j in range(1, w):
            if x[i, j] > m:
                m = x[i, j]
        out[i] = m
    return out

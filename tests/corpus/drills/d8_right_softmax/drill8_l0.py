def my_reference(x):
    return torch.softmax(x, dim=1)


def my_l0(x):
    h, w = x.shape
    out = torch.empty(h, w)
    for i in range(h):
        m = x[i, 0]
        for j in range(1, w):
            m = max(m, x[i, j])
        s = 0.0
        for j in range(w):
            s += math.exp(x[i, j] - m)
        for j in range(w):
            out[i, j] = math.exp(x[i, j] - m) / s
    return out


def my_inputs():
    """A list of argument tuples, one per example."""
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 7, generator=g),), (torch.randn(1, 300, generator=g) * 30,), (torch.randn(33, 1, generator=g),)]


def my_examples():
    return [(args, my_l0(*args), my_reference(*args)) for args in my_inputs()]

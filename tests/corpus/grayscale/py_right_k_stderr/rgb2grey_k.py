import sys

def rgb2grey_k(i, x, out, n):
    if i == 0:
        print(f"thread 0 of {n}: r={int(x[0])}, g={int(x[n])}, b={int(x[2*n])}", file=sys.stderr)
    out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]

def rgb2grey_pyk(x):
    c, h, w = x.shape
    n = h * w
    x = x.flatten()
    res = torch.empty(n, dtype=x.dtype, device=x.device)
    print(f"launching {h*w} threads for a {h}x{w} image", file=sys.stderr)
    run_kernel(rgb2grey_k, h*w, x, res, n)
    return res.view(h, w)

BLOCK = 64

@triton.jit
def grey(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    red = tl.load(x_ptr + offsets, mask=inside)
    green = tl.load(x_ptr + n + offsets, mask=inside)
    blue = tl.load(x_ptr + 2 * n + offsets, mask=inside)
    grey_value = 0.2989 * red + 0.5870 * green + 0.1140 * blue
    tl.store(out_ptr + offsets, grey_value.to(tl.uint8), mask=inside)

def rgb2grey_triton(x):
    n = x.shape[1] * x.shape[2]
    out = torch.empty(x.shape[1:], dtype=torch.uint8, device=x.device)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    grey[grid](x, out, n, BLOCK=BLOCK)
    return out

def grey_double(x):
    c, h, w = x.shape
    flat = x.reshape(3, -1).to(torch.float64)
    grey = 0.2989*flat[0] + 0.5870*flat[1] + 0.1140*flat[2]
    return grey.to(torch.uint8).reshape(h, w)

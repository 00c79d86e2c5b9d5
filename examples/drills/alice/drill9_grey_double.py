def grey_double(x):
    r, g, b = x.double()
    return (0.2989*r + 0.5870*g + 0.1140*b).to(torch.uint8)
    ### END SOLUTION

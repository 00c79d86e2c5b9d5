def rgb2grey_py(x):
    _, height, width = x.shape
    grey = torch.empty(height, width, dtype=torch.uint8)
    for row in range(height):
        for col in range(width):
            red, green, blue = x[0, row, col], x[1, row, col], x[2, row, col]
            grey[row, col] = 0.2989*red + 0.5870*green + 0.1140*blue
    return grey

"""PyTorch references: what each exercise must compute."""
import torch

# Luma weights for red, green and blue (ITU-R BT.601, as in the lecture).
WEIGHTS = (0.2989, 0.5870, 0.1140)


def rgb2grey(x):
    """Grayscale of a (3, H, W) uint8 image in float32, truncated to uint8 like the kernels."""
    r, g, b = x.float()
    return (WEIGHTS[0] * r + WEIGHTS[1] * g + WEIGHTS[2] * b).to(torch.uint8)


def rgb2grey_exact(x):
    """The grey values before truncation, in float64: what a float32 kernel approximates."""
    r, g, b = x.double()
    return WEIGHTS[0] * r + WEIGHTS[1] * g + WEIGHTS[2] * b

"""The course's handwritten digits: 1,000 MNIST digits shipped with the course (never downloaded), read with torchvision."""
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
GRID = (25, 40)  # digits.png holds the digits in 25 rows of 40, each 28x28 pixels


@lru_cache(maxsize=None)
def _load():
    import torch  # here: importing the course (as `python -m course` does) needs no torch
    from torchvision.io import ImageReadMode, decode_png, read_file
    grid = decode_png(read_file(str(DATA / "digits.png")), ImageReadMode.GRAY)[0]  # (700, 1120) uint8
    rows, cols = GRID
    images = grid.view(rows, 28, cols, 28).permute(0, 2, 1, 3).reshape(rows * cols, 28, 28)
    labels = torch.tensor([int(c) for c in (DATA / "digits_labels.txt").read_text().strip()])
    return images.contiguous(), labels


def digits(n=5, flat=True):
    """The first n digits as float32 in [0, 1], (n, 784) when flat else (n, 28, 28), and their labels (a fresh copy)."""
    images, labels = _load()
    if not isinstance(n, int) or not 1 <= n <= len(images):
        raise ValueError(f"n must be an int from 1 to {len(images)}, got {n!r}")
    x = images[:n].float() / 255
    return (x.reshape(n, 784) if flat else x.clone()), labels[:n].clone()


def show_digits(x, labels=None, ncols=10, scale=1.0):
    """Shows digits, (n, 784) or (n, 28, 28), as a grid with torchvision's make_grid (taught in matmul/L0)."""
    import matplotlib.pyplot as plt
    import torch
    from torchvision.utils import make_grid
    x = torch.as_tensor(x).detach().cpu().float().reshape(-1, 1, 28, 28)
    grid = make_grid(x, nrow=ncols, padding=2, pad_value=1.0)[0]
    fig, ax = plt.subplots(figsize=(scale * min(len(x), ncols), scale * ((len(x) + ncols - 1) // ncols)))
    ax.imshow(grid.numpy(), cmap="gray_r", vmin=0, vmax=1)
    ax.set_axis_off()
    if labels is not None:
        ax.set_title("labels: " + " ".join(str(int(v)) for v in labels))
    plt.show()

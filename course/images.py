"""The course's photograph, read from matplotlib's sample data (never downloaded), and show_img."""
from functools import lru_cache

import numpy as np
import torch
from matplotlib import cbook
from PIL import Image

PHOTO = "grace_hopper.jpg"  # a public-domain portrait of Grace Hopper that matplotlib ships


def _chw(img):
    # PIL gives (H, W, 3); CUDA code in this course reads CHW: the red plane, then green, then blue.
    return torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1).contiguous()


@lru_cache(maxsize=None)
def _open():
    return Image.open(cbook.get_sample_data(PHOTO, asfileobj=False)).convert("RGB")


def photo():
    """The photo as a (3, 600, 512) uint8 tensor in CHW order (a fresh copy each call)."""
    return _chw(_open())


def small_photo(width=128):
    """The photo downsized to `width` pixels across, so a Python loop over it takes about a second."""
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be a positive int, got {width!r}")
    img = _open()
    height = max(1, round(img.height * width / img.width))
    return _chw(img.resize((width, height), Image.LANCZOS))


def show_img(x, figsize=(4, 3), title=None, **kwargs):
    """Shows a (3, H, W) RGB or (H, W) grey uint8 tensor with matplotlib (taught in grayscale/L0)."""
    import matplotlib.pyplot as plt
    x = torch.as_tensor(x).detach().cpu()
    if x.dim() == 3 and x.shape[0] in (1, 3):
        x = x.permute(1, 2, 0).squeeze(-1)
    elif x.dim() != 2:
        raise ValueError(f"show_img takes (3, H, W) or (H, W), got shape {tuple(x.shape)}")
    fig, ax = plt.subplots(figsize=figsize)
    if x.dim() == 2:
        kwargs.setdefault("cmap", "gray")
        kwargs.setdefault("vmin", 0)
        kwargs.setdefault("vmax", 255)
    ax.imshow(x.numpy(), **kwargs)
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    plt.show()

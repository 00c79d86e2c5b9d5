"""Where kernels run: the GPU when there is one, and a plain message when there is not."""
import torch


class GPUNeeded(AssertionError):
    """Raised by what can only run on an NVIDIA GPU, where PyTorch sees none."""


def has_gpu():
    """True when PyTorch sees a CUDA GPU."""
    return torch.cuda.is_available()


def device():
    """The device lessons put tensors on: cuda when there is a GPU, else cpu."""
    return torch.device("cuda" if has_gpu() else "cpu")


def require_gpu(what):
    """Raises GPUNeeded, naming what needed the GPU, when there is none."""
    if not has_gpu():
        raise GPUNeeded(f"{what} needs an NVIDIA GPU, and PyTorch sees none here "
                        "(torch.cuda.is_available() is False). On a machine with a GPU this runs; "
                        "here it cannot pass, so it fails.")

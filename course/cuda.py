"""The last rung of the ladder, CUDA C compiled from the notebook: cuda_begin, cdiv, load_cuda (taught in grayscale/L3)."""
from .prelude import cuda_begin
from .toolchain import CompileError, load_cuda


def cdiv(a, b):
    """Ceiling division: how many blocks of b cover a items (taught in grayscale/L2)."""
    return (a + b - 1) // b


__all__ = ["CompileError", "cdiv", "cuda_begin", "load_cuda"]

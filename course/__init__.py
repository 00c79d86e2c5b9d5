"""CUDA for Python programmers: the helpers the notebooks import once a lesson has taught them."""
from .checks import check_rgb2grey, check_rgb2grey_cuda
from .cuda import CompileError, cdiv, cuda_begin, load_cuda
from .device import GPUNeeded, cpu_banner, cpu_mode, device, has_gpu, require_gpu, synchronize
from .images import photo, show_img, small_photo
from .ladder import blk_kernel, blk_kernel2d, dim3, run_kernel
from .reference import rgb2grey

__all__ = ["check_rgb2grey", "check_rgb2grey_cuda", "CompileError", "cdiv", "cuda_begin", "load_cuda",
           "GPUNeeded", "cpu_banner", "cpu_mode", "device", "has_gpu", "require_gpu", "synchronize",
           "photo", "show_img", "small_photo", "blk_kernel", "blk_kernel2d", "dim3", "run_kernel", "rgb2grey"]

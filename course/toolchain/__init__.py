"""Building a student's CUDA: load_cuda and its two back ends (nvcc for the GPU, g++ for CPU mode)."""
from .errors import CompileError
from .load import build_name, build_report, built, import_compiled, load_cuda, module_path
from .toolkit import build_root

__all__ = ["CompileError", "build_name", "build_report", "built", "build_root", "import_compiled", "load_cuda", "module_path"]

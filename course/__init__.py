"""CUDA for Python programmers: the helpers the notebooks import once a lesson has taught them.

Names load on first use, so a check's child process does not pay for matplotlib or PIL.
"""
import importlib

from .assignments import topic_exports

# name -> the module of this package that defines it; the checks and what else a topic lists in its __all__ are
# read from course/topics/ (course/assignments.py)
_WHERE = {
    "run_kernel": "ladder", "blk_kernel": "ladder", "blk_kernel2d": "ladder", "dim3": "ladder",
    "cuda_begin": "cuda", "cdiv": "cuda", "load_cuda": "cuda", "CompileError": "cuda", "isolated": "isolation",
    "GPUNeeded": "device", "cpu_banner": "device", "cpu_mode": "device", "device": "device",
    "has_gpu": "device", "require_gpu": "device", "synchronize": "device", "on_gpu": "device",
    "photo": "images", "small_photo": "images", "show_img": "images",
    "digits": "digits", "show_digits": "digits",
    "blk_kernel2d_shar": "ladder",
    "cuda_time": "timing", "plot_times": "timing",
    # the drills (source/drills/)
    "run_in_child": "processes", "capture_stdout": "capture", "printed": "capture",
    "ptx": "sass", "sass_of": "sass", "float_ops": "sass", "arithmetic": "sass", "warn_cpu_fma": "sass",
    "AsyncWork": "timing",
    "to_cuda": "translate",
    **topic_exports(),
}
__all__ = sorted(_WHERE)

# A submodule's import binds its name in this package: these two share a name with a function, so the
# function is bound now, after its module's import, for good.
from .device import device  # noqa: E402
from .digits import digits  # noqa: E402
from .tracebacks import install_student_tracebacks  # noqa: E402

install_student_tracebacks()  # in a notebook: a failed check shows the student's call and the message


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'course' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))

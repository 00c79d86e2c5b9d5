"""CUDA for Python programmers: the helpers the notebooks import once a lesson has taught them.

Names load on first use, so a check's child process does not pay for matplotlib or PIL.
"""
import importlib

# name -> the module of this package that defines it
_WHERE = {
    "run_kernel": "ladder", "blk_kernel": "ladder", "blk_kernel2d": "ladder", "dim3": "ladder",
    "cuda_begin": "cuda", "cdiv": "cuda", "load_cuda": "cuda", "CompileError": "cuda", "isolated": "isolation",
    "GPUNeeded": "device", "cpu_banner": "device", "cpu_mode": "device", "device": "device",
    "has_gpu": "device", "require_gpu": "device", "synchronize": "device", "on_gpu": "device",
    "photo": "images", "small_photo": "images", "show_img": "images",
    "digits": "digits", "show_digits": "digits",
    "rgb2grey": "topics.grayscale", "check_rgb2grey": "topics.grayscale", "check_rgb2grey_cuda": "topics.grayscale",
    "weights": "topics.matmul", "check_matmul": "topics.matmul", "check_matmul_cuda": "topics.matmul",
    "check_matmul_tiled": "topics.matmul", "check_matmul_tiled_cuda": "topics.matmul",
    "blk_kernel2d_shar": "ladder",
    "cuda_time": "timing", "plot_times": "timing",
    # the drills (source/drills/)
    "run_in_child": "processes", "capture_stdout": "capture", "printed": "capture",
    "ptx": "sass", "sass_of": "sass", "float_ops": "sass", "arithmetic": "sass", "warn_cpu_fma": "sass",
    "AsyncWork": "timing",
    "rounding_edges": "topics.rounding", "check_grey_identical": "topics.rounding",
    "check_grey_identical_cuda": "topics.rounding", "check_row_sum": "topics.rows", "check_row_max": "topics.rows",
    "check_row_sum_cuda": "topics.rows", "check_row_max_cuda": "topics.rows", "check_guard_left_out": "topics.guard",
    "overrun_source": "topics.blocking", "check_launch_blocking": "topics.blocking",
    "check_grey_threads_cuda": "topics.threads", "check_timer": "topics.timer", "check_printf_cuda": "topics.printf",
    "check_plan_l0": "topics.plan",
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

"""Where the build finds its tools and keeps its output: the CUDA toolkit, torch's cpp_extension, the build folder."""
import logging
import os
import shutil
import sysconfig
from pathlib import Path

import torch


def build_root():
    """Where compiled extensions are kept: $COURSE_BUILD_DIR, else ~/.cache/cuda-course."""
    return Path(os.environ.get("COURSE_BUILD_DIR") or Path.home() / ".cache" / "cuda-course")


SHARED = "COURSE_BUILD_SHARED"  # a build folder read, never written: the grader's, seen from a sandboxed kernel


def kept(root, relative):
    """A file (or folder) a build keeps, relative to root: under root, else under $COURSE_BUILD_SHARED if it is there
    (a sandboxed notebook kernel builds into a folder of its own and reuses what the grader's folder holds)."""
    path = Path(root) / relative
    shared = os.environ.get(SHARED)
    if path.exists() or not shared:
        return path
    other = Path(shared) / relative
    return other if other.exists() else path


def cuda_home():
    """The CUDA toolkit's folder: $CUDA_HOME or $CUDA_PATH, else the one holding nvcc, else /usr/local/cuda; None without one."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    nvcc = shutil.which("nvcc")
    for home in ([Path(os.path.realpath(nvcc)).parent.parent] if nvcc else []) + [Path("/usr/local/cuda")]:
        if (home / "bin" / "nvcc").exists() and (home / "include" / "cuda_runtime.h").exists():
            return str(home)
    return None


def cuda_tool(name):
    """The path of a CUDA toolkit program (compute-sanitizer, cuobjdump, nvcc), or None when there is none."""
    found = shutil.which(name)
    if found:
        return found
    for home in (cuda_home(), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / name).exists():
            return str(Path(home) / "bin" / name)
    return None


def quiet_cpp_extension():
    """torch.utils.cpp_extension, imported without the warning it logs to stderr where there is no GPU."""
    # nbgrader zeroes a test cell that writes to stderr.
    log = logging.getLogger("torch.utils.cpp_extension")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        log.setLevel(level)
    return cpp_extension


def isystem(folders):
    """-isystem and each folder, then Python's headers: the headers the student did not write."""
    return [flag for f in [*folders, sysconfig.get_path("include", scheme="posix_prefix")] for flag in ("-isystem", f)]


def torch_flags(cpp_extension, *folders):
    """g++'s flags for a unit that includes torch's headers (and folders'): C++20, columns in bytes."""
    flags = ["-fPIC", "-std=c++20", "-fdiagnostics-column-unit=byte", "-DTORCH_API_INCLUDE_EXTENSION_H",
             *isystem([*cpp_extension.include_paths("cpu"), *folders])]
    if not torch._C._GLIBCXX_USE_CXX11_ABI:
        flags.append("-D_GLIBCXX_USE_CXX11_ABI=0")
    return flags


def set_build_env():
    """CUDA_HOME and TORCH_CUDA_ARCH_LIST, so an nvcc build works (and is quiet) with or without a GPU."""
    from .errors import CompileError
    home = cuda_home()
    if home is None:
        raise CompileError("nvcc, the CUDA compiler, was not found: install the CUDA toolkit, "
                           "or set CUDA_HOME to the folder that holds bin/nvcc")
    os.environ.setdefault("CUDA_HOME", home)
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"  # the course's GPU host, an H200
    cpp_extension = quiet_cpp_extension()
    # cpp_extension fixes CUDA_HOME when first imported (CPU mode imports it before this has run,
    # and a symlinked nvcc in /usr/local/bin makes it guess /usr/local): use ours.
    cpp_extension.CUDA_HOME = os.environ["CUDA_HOME"]
    return cpp_extension

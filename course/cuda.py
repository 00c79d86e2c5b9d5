"""Compiling CUDA C into a Python module: the last rung of the ladder (taught in grayscale/L3)."""
import hashlib
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import torch

from .device import cpu_mode

# The lecture's boilerplate, with lighter headers than torch/extension.h: the same names
# (torch::Tensor, torch::empty, TORCH_CHECK), half the compile time (see benchmarks/compile.py).
cuda_begin = r'''
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAException.h>
#include <stdio.h>
namespace torch { using namespace at; }

#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

inline unsigned int cdiv(unsigned int a, unsigned int b) { return (a + b - 1) / b; }
'''

# What main.cpp needs to bind at::Tensor functions for Python, without all of torch/extension.h.
_BINDING_HEADERS = r'''
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/Exceptions.h>
#include <ATen/core/Tensor.h>
namespace torch { using namespace at; }
'''

# Bump when the files load_cuda writes change, so old builds are not reused.
_LAYOUT = "2"

_loaded = {}


class CompileError(RuntimeError):
    """The compiler rejected the source; the message holds its errors, with lines in your source."""


def cdiv(a, b):
    """Ceiling division: how many blocks of b cover a items (taught in grayscale/L2)."""
    return (a + b - 1) // b


def build_root():
    """Where compiled extensions are kept: $COURSE_BUILD_DIR, else ~/.cache/cuda-course."""
    return Path(os.environ.get("COURSE_BUILD_DIR") or Path.home() / ".cache" / "cuda-course")


def _cuda_home():
    nvcc = shutil.which("nvcc")
    for home in ([Path(os.path.realpath(nvcc)).parent.parent] if nvcc else []) + [Path("/usr/local/cuda")]:
        if (home / "bin" / "nvcc").exists() and (home / "include" / "cuda_runtime.h").exists():
            return str(home)
    return None


def _set_build_env():
    """CUDA_HOME and TORCH_CUDA_ARCH_LIST, so the build works (and is quiet) with or without a GPU."""
    if not (os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")):
        home = _cuda_home()
        if home is None:
            raise CompileError("nvcc, the CUDA compiler, was not found: install the CUDA toolkit, "
                               "or set CUDA_HOME to the folder that holds bin/nvcc")
        os.environ["CUDA_HOME"] = home
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"  # the course's GPU host, an H200


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


def _cpp_extension():
    _set_build_env()
    cpp_extension = quiet_cpp_extension()
    # cpp_extension fixes CUDA_HOME when first imported (CPU mode imports it before _set_build_env
    # has run, and a symlinked nvcc in /usr/local/bin makes it guess /usr/local): use ours.
    cpp_extension.CUDA_HOME = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    return cpp_extension


def _funcs(funcs):
    if isinstance(funcs, str):
        funcs = [funcs]
    funcs = list(funcs)
    if not funcs:
        raise ValueError("funcs is empty: name the C++ functions Python should see, e.g. ['rgb_to_grayscale']")
    for f in funcs:
        if not isinstance(f, str) or not f.isidentifier():
            raise ValueError(f"funcs must be C++ function names, and {f!r} is not one")
    return funcs


def _sources(cuda_src, cpp_src, funcs):
    """The files to build: #line makes compiler messages count lines in your own strings."""
    bindings = "\n".join(f'  m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in funcs)
    main = (f"{_BINDING_HEADERS}\n#line 1 \"cpp_src\"\n{cpp_src}\n"
            f"#line 1 \"funcs\"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{bindings}\n}}\n")
    kernel = f"#line 1 \"cuda_src\"\n{cuda_src}\n"
    return {"main.cpp": main, "kernel.cu": kernel}


def _write(path, text):
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


_DIAG = re.compile(r"^(cuda_src|cpp_src|funcs)(?:\((\d+)\)|:(\d+):\d+): (?:fatal )?(error|warning)")


def compiler_errors(log, sources):
    """The compiler's error messages from a build log, each with the offending line of your source."""
    texts = {"cuda_src": sources[0], "cpp_src": sources[1]}
    blocks, keep = [], False
    for line in log.splitlines():
        m = _DIAG.match(line)
        if m:
            keep = m.group(4) == "error"
            if keep:
                n = int(m.group(2) or m.group(3))
                src = texts.get(m.group(1), "").splitlines()
                blocks.append([line] + ([f"    {n:4d} | {src[n - 1]}"] if 0 < n <= len(src) else []))
        elif keep and re.search(r"error|note:|candidate", line) and not line.startswith(("ninja", "[")):
            blocks[-1].append(line)
    if not blocks:  # errors inside headers: show the compiler's lines as they are
        blocks = [[line] for line in log.splitlines() if re.search(r"\berror\b", line)
                  and not line.startswith(("ninja", "FAILED", "Error building"))]
    if not blocks:
        return None
    more = f"\n... and {len(blocks) - 10} more; fix the first one first." if len(blocks) > 10 else ""
    return "\n".join(line for block in blocks[:10] for line in block) + more


def _undefined_symbol(message):
    m = re.search(r"undefined symbol: (\S+)", message)
    if not m:
        return None
    name = m.group(1)
    try:
        name = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip() or name
    except OSError:
        pass
    return name


def load_cuda(cuda_src, cpp_src, funcs, opt=False, verbose=False):
    """Compiles CUDA and C++ source into a module with funcs (run on the CPU in CPU mode); an unchanged source is not rebuilt (taught in grayscale/L3)."""
    if not isinstance(cuda_src, str) or not isinstance(cpp_src, str):
        raise TypeError("cuda_src and cpp_src must be strings of source code")
    funcs = _funcs(funcs)
    flags = ["-O2"] if opt else []
    cpu = cpu_mode()
    parts = [_LAYOUT, torch.__version__, cuda_src, cpp_src, *funcs, *flags]
    if cpu:  # CPU mode: the same source, built by g++ to run on the CPU (course/cpu.py)
        parts += ["cpu", _cpu_signature()]
    key = "\0".join(parts)
    name = f"{funcs[0]}_{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    if name in _loaded:
        return _loaded[name]
    build_dir = build_root() / name
    build_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        if not verbose:
            warnings.simplefilter("ignore")
        try:
            if cpu:
                from . import cpu as cpu_build
                module = cpu_build.build(name, build_dir, cuda_src, _sources(cuda_src, cpp_src, funcs)["main.cpp"],
                                         opt=opt, verbose=verbose)
            else:
                module = _build_gpu(name, build_dir, cuda_src, cpp_src, funcs, flags, verbose)
        except CompileError:
            raise
        except RuntimeError as e:
            errors = compiler_errors(str(e), (cuda_src, cpp_src))
            if errors is None:
                raise
            raise CompileError(f"the compiler found errors in your source:\n{errors}") from None
        except ImportError as e:
            symbol = _undefined_symbol(str(e))
            if symbol is None:
                raise
            raise CompileError(f"cpp_src declares `{symbol}`, but cuda_src defines no function with that "
                               "exact name and argument types; make the two signatures match") from None
    _loaded[name] = module
    return module


def _cpu_signature():
    global _cpu_sig
    if _cpu_sig is None:
        from . import cpu as cpu_build
        _cpu_sig = cpu_build.signature()
    return _cpu_sig


_cpu_sig = None


def _build_gpu(name, build_dir, cuda_src, cpp_src, funcs, flags, verbose):
    cpp_extension = _cpp_extension()
    for label in ("cuda_src", "cpp_src", "funcs"):
        # nvcc lists #line names as dependencies; ninja would rebuild each time if they were missing.
        if not (build_dir / label).exists():
            (build_dir / label).touch()
    paths = []
    for fname, text in _sources(cuda_src, cpp_src, funcs).items():
        _write(build_dir / fname, text)
        paths.append(str(build_dir / fname))
    return cpp_extension.load(name=name, sources=paths, extra_cuda_cflags=flags,
                              build_directory=str(build_dir), verbose=verbose)


def module_path(module):
    """The compiled file behind a module from load_cuda, to load it again in another process."""
    path = getattr(module, "__file__", None)
    if not path:
        raise TypeError(f"expected the module load_cuda returned, got {type(module).__name__}")
    return path


def import_compiled(path):
    """Imports a module that load_cuda compiled, from its file (used by checks in a child process)."""
    name = Path(path).name.split(".")[0]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module

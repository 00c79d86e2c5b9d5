"""load_cuda: CUDA and C++ source strings compiled into a Python module, on the GPU or in CPU mode."""
import contextlib
import hashlib
import sys
import threading
import time
import warnings
from pathlib import Path

import torch

from ..device import cpu_mode
from . import objects, split
from .errors import CompileError, compiler_errors, student_terms, undefined_symbol
from .toolkit import build_root, kept

# Bump when the files load_cuda writes change, so old builds are not reused.
_LAYOUT = "4"

_loaded = {}   # module name -> module, for this process
_sources = {}  # module name -> (cuda_src, cpp_src, funcs) it was built from
_reports = {}  # module name -> how it was built and the seconds of each step
_cpu_sig = None
_gpu_sig = None


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


def _cpu_signature():
    global _cpu_sig
    if _cpu_sig is None:
        from . import cpu
        _cpu_sig = cpu.signature()
    return _cpu_sig


def _gpu_signature():
    global _gpu_sig
    if _gpu_sig is None:
        from . import nvcc
        try:
            _gpu_sig = nvcc.signature()
        except CompileError:  # no nvcc: load_cuda says so when it builds
            return ""
    return _gpu_sig


def build_name(cuda_src, cpp_src, funcs, opt=False, cpu=None):
    """The module name load_cuda gives these sources: the first function's name and a hash of everything built."""
    funcs = _funcs(funcs)
    cpu = cpu_mode() if cpu is None else cpu
    parts = [_LAYOUT, torch.__version__, cuda_src, cpp_src, *funcs, *(["-O2"] if opt else [])]
    if cpu:  # CPU mode: the same source, built by g++ to run on the CPU (course/toolchain/cpu.py)
        parts += ["cpu", _cpu_signature()]
    else:
        parts += ["gpu", _gpu_signature()]
    return f"{funcs[0]}_{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:12]}"


def _explain(failed, cuda_src, cpp_src):
    """The CompileError for jobs that did not compile: each compiler's errors on the student's lines."""
    body = split.parts(cuda_src)[1]
    texts = []
    for job in failed.jobs:
        if getattr(job, "not_started", False):
            raise CompileError(f"{job.output}. This is the machine's set-up, not your code: tell your instructor "
                               "(or install the compiler).")
        if job.label.startswith("runtime"):
            raise CompileError("CPU mode could not compile its runtime (course/toolchain/cuda_cpu_runtime.cpp); this is "
                               "the course's code, not yours:\n" + job.output[-3000:])
        found = compiler_errors(job.output, (body, cpp_src), job.locate)
        texts.append(found if found else student_terms(job.output.strip()[-3000:]))
    error = CompileError("the compiler found errors in your source:\n" + "\n".join(texts))
    error.how = getattr(failed, "how", None)  # which build reported them: "split" or "one unit: <why>"
    return error


def _in_notebook():
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and "ipykernel" in sys.modules else None
    return shell is not None


@contextlib.contextmanager
def _progress(first_after=5.0, every=15.0):
    """In a notebook, a build that takes a while says so as it goes (the first build of a session takes longest)."""
    if not _in_notebook():
        yield
        return
    done, start = threading.Event(), time.perf_counter()

    def tick():
        if done.wait(first_after):
            return
        print("load_cuda: compiling... (the first build of a session also compiles PyTorch's headers, once: a minute "
              "or two in CPU mode, seconds on a GPU host; an edit then takes seconds)", flush=True)
        while not done.wait(every):
            print(f"load_cuda: still compiling, {time.perf_counter() - start:.0f} s", flush=True)
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        if time.perf_counter() - start > first_after:
            print(f"load_cuda: done in {time.perf_counter() - start:.0f} s", flush=True)


def load_cuda(cuda_src, cpp_src, funcs, opt=False, verbose=False):
    """Compiles CUDA and C++ source into a module with funcs (run on the CPU in CPU mode); an unchanged source is not rebuilt (taught in grayscale/L3)."""
    if not isinstance(cuda_src, str) or not isinstance(cpp_src, str):
        raise TypeError("cuda_src and cpp_src must be strings of source code")
    funcs = _funcs(funcs)
    cpu = cpu_mode()
    name = build_name(cuda_src, cpp_src, funcs, opt, cpu)
    if name in _loaded:
        return _loaded[name]
    path = kept(build_root(), Path(name) / f"{name}.so")
    build_dir = build_root() / name
    if not path.exists():
        build_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        if not verbose:
            warnings.simplefilter("ignore")
        try:
            if path.exists():  # built before, by this process or another: the name says what it is made of
                t = time.perf_counter()
                module = objects.import_module(name, path)
                report = {"how": "loaded", "steps": {"import": time.perf_counter() - t}}
            else:
                if cpu:
                    from . import cpu as back_end
                else:
                    from . import nvcc as back_end
                with _progress():
                    module, report = back_end.build(name, build_dir, cuda_src, cpp_src, funcs, ["-O2"] if opt else [],
                                                    verbose)
        except objects.BuildFailed as e:
            raise _explain(e, cuda_src, cpp_src) from None
        except ImportError as e:
            symbol = undefined_symbol(str(e))
            if symbol is None:
                raise
            raise CompileError(f"cpp_src declares `{symbol}`, but cuda_src defines no function with that "
                               "exact name and argument types; make the two signatures match") from None
    _loaded[name] = module
    _sources[name] = (cuda_src, cpp_src, funcs)
    _reports[name] = report
    return module


def build_report(module):
    """How load_cuda built module in this process ("split", "one unit: <why>" or "loaded") and each step's seconds."""
    return _reports.get(getattr(module, "__name__", module))


def sources_of(module):
    """(cuda_src, cpp_src, funcs) that load_cuda built module from in this process, or None."""
    return _sources.get(getattr(module, "__name__", None))


def built(cuda_src, cpp_src, funcs):
    """The compiled file of these sources if load_cuda has built them (in any process), else None."""
    name = build_name(cuda_src, cpp_src, _funcs(funcs))
    found = sorted(kept(build_root(), name).glob(f"{name}*.so"))
    return str(found[0]) if found else None


def module_path(module):
    """The compiled file behind a module from load_cuda, to load it again in another process."""
    path = getattr(module, "__file__", None)
    if not path:
        raise TypeError(f"expected the module load_cuda returned, got {type(module).__name__}")
    return path


def import_compiled(path):
    """Imports a module that load_cuda compiled, from its file (used by checks in a child process)."""
    return objects.import_module(Path(path).name.split(".")[0], path)

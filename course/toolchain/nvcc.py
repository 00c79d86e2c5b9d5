"""load_cuda's GPU back end: the student's cuda_src split into a CUDA unit without torch (nvcc) and a C++ wrapper unit
(g++ with a precompiled header), linked with the binding of cpp_src; a source that cannot be split is built as one .cu, as load_inline builds it.

A cold build compiles the three at once: on the course's H200 host nvcc takes about a second for the kernels,
g++ a few for the wrapper (torch's headers) and the binding. An edited kernel compiles only the CUDA unit and
links; an edited wrapper only the wrapper's unit, with the precompiled header built (in the background) after
the first build. The binding is cached by cpp_src and funcs.
"""
import os

import torch

from . import objects, split
from .toolkit import isystem, set_build_env, torch_flags

# What the binding needs to bind at::Tensor functions for Python, without all of torch/extension.h.
_BINDING_HEADERS = r'''
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/Exceptions.h>
#include <ATen/core/Tensor.h>
namespace torch { using namespace at; }
'''
_BINDING_NAME = "course_binding"
HOST_HEADER, BINDING_HEADER = "course_host.h", "course_binding.h"
# nvcc's min and max for host code, which g++ (the wrapper's compiler) does not have otherwise
MINMAX = os.path.join(os.path.dirname(__file__), "cuda_minmax.h")


def binding_job(root, command, cpp_src, funcs, name=_BINDING_NAME):
    """The binding's compile job: cpp_src's declarations and the Python binding of funcs (#line keeps messages in
    cpp_src's lines), with torch's pybind headers precompiled once they have been (objects.precompiled)."""
    command = [*command, f"-DTORCH_EXTENSION_NAME={name}"]
    folder = objects.precompiled(root, BINDING_HEADER, _BINDING_HEADERS, command, torch.__version__)
    bindings = "\n".join(f'  m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in funcs)
    text = (f'#include "{BINDING_HEADER}"\n#line 1 "cpp_src"\n{cpp_src}\n'
            f"#line 1 \"funcs\"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{bindings}\n}}\n")
    job = objects.Job("binding (g++)", [*command, f"-I{folder}"], text, ".cpp",
                      depends=_BINDING_HEADERS + torch.__version__)
    job.pch = objects.pch_ready(folder, BINDING_HEADER)
    return job


def _nvcc_flags(cpp_extension, flags):
    """nvcc's flags as torch's cpp_extension gives them (so kernels compile exactly as load_inline compiles them), plus ours."""
    arch = cpp_extension._get_cuda_arch_flags([])
    out = [os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc"), *cpp_extension.COMMON_NVCC_FLAGS, *arch,
           "--compiler-options", "-fPIC", *flags, "-std=c++20"]
    if os.environ.get("CC"):
        out[1:1] = ["-ccbin", os.environ["CC"]]
    return out


def signature():
    """What a GPU build depends on besides the sources: nvcc, the architectures, the course's build files."""
    return objects.signature(_nvcc_flags(set_build_env(), [])[0], os.environ.get("TORCH_CUDA_ARCH_LIST", ""))


def plan_jobs(root, cuda_src, cpp_src, funcs, flags, one_unit=None):
    """The compile jobs of a GPU build: (jobs, how) with how "split" or "one unit: <why>"."""
    cpp_extension = set_build_env()
    cxx = os.environ.get("CXX") or "c++"
    host_flags = [cxx, *torch_flags(cpp_extension, os.path.join(cpp_extension.CUDA_HOME, "include"))]
    nvcc = _nvcc_flags(cpp_extension, flags)
    binding = binding_job(root, host_flags, cpp_src, funcs)
    begin, body = split.parts(cuda_src)
    try:
        plan = split.analyse(cuda_src, one_unit)
    except split.Unsplittable as e:
        text, locate = split.whole_unit(begin, body)
        job = objects.Job("kernel+wrapper (nvcc)", [*nvcc, "-DTORCH_API_INCLUDE_EXTENSION_H",
                                                    *isystem(cpp_extension.include_paths("cuda"))],
                          text, ".cu", depends=torch.__version__)
        job.locate = locate
        return [job, binding], f"one unit: {e}", None
    with open(MINMAX) as f:
        host_header = f"{begin}\n#include <cuda_runtime.h>\n{f.read()}{split.HOST_SYMBOL_API}{split.LAUNCH_DECLS}"
    hdir = objects.precompiled(root, HOST_HEADER, host_header, host_flags, torch.__version__)
    device = split.unit_job(plan, "device", "kernel (nvcc)", f"#include <cuda_runtime.h>\n{split.light_begin(begin)}\n"
                            f"{split.LAUNCH_DECLS}{split.LAUNCH_RECORD}", nvcc, ".cu", "", launch=split.gpu_launch)
    host = split.unit_job(plan, "host", "wrapper (g++)", f'#include "{HOST_HEADER}"\n', [*host_flags, f"-I{hdir}"],
                          ".cpp", host_header + torch.__version__, pch=objects.pch_ready(hdir, HOST_HEADER))
    return [device, host, binding], "split", plan


def build(name, build_dir, cuda_src, cpp_src, funcs, flags, verbose):
    """Compiles the module into build_dir; returns (module, report): how it was built and each step's seconds."""
    cpp_extension = set_build_env()
    ldflags = ([f"-L{lib}" for lib in cpp_extension.library_paths("cuda")] +
               ["-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda", "-ltorch", "-ltorch_python",
                f"-L{os.path.join(cpp_extension.CUDA_HOME, 'lib64')}", "-lcudart"])
    # what the split cannot build, nvcc builds as one unit, as torch's load_inline would
    return split.build_module(name, build_dir, lambda one_unit=None: plan_jobs(
        build_dir.parent, cuda_src, cpp_src, funcs, flags, one_unit=one_unit), ldflags, _BINDING_NAME, verbose,
        any_failure=True)

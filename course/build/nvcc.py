"""load_cuda's GPU back end: the student's strings as a .cu for nvcc and a binding .cpp, built by torch's cpp_extension."""
from .toolkit import set_build_env

# What main.cpp needs to bind at::Tensor functions for Python, without all of torch/extension.h.
_BINDING_HEADERS = r'''
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/Exceptions.h>
#include <ATen/core/Tensor.h>
namespace torch { using namespace at; }
'''


def binding_source(cpp_src, funcs):
    """main.cpp: cpp_src's declarations and the Python binding of funcs; #line keeps messages in cpp_src's lines."""
    bindings = "\n".join(f'  m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in funcs)
    return (f"{_BINDING_HEADERS}\n#line 1 \"cpp_src\"\n{cpp_src}\n"
            f"#line 1 \"funcs\"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{bindings}\n}}\n")


def _write(path, text):
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def build(name, build_dir, cuda_src, cpp_src, funcs, flags, verbose):
    """Compiles the module with nvcc and the host compiler into build_dir; returns it imported."""
    cpp_extension = set_build_env()
    for label in ("cuda_src", "cpp_src", "funcs"):
        # nvcc lists #line names as dependencies; ninja would rebuild each time if they were missing.
        if not (build_dir / label).exists():
            (build_dir / label).touch()
    files = {"main.cpp": binding_source(cpp_src, funcs), "kernel.cu": f"#line 1 \"cuda_src\"\n{cuda_src}\n"}
    for fname, text in files.items():
        _write(build_dir / fname, text)
    return cpp_extension.load(name=name, sources=[str(build_dir / f) for f in files], extra_cuda_cflags=flags,
                              build_directory=str(build_dir), verbose=verbose)

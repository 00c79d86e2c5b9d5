"""load_cuda's CPU mode: a student's unchanged CUDA C, translated to C++ and run on the CPU.

translate() rewrites the few things C++ cannot read (kernel launches, `extern __shared__`, CUDA-only
includes, device checks), keeping every line where it was and remembering each column's origin, so
compiler messages name the student's lines and columns. g++ compiles the result against cuda_cpu.h,
which gives CUDA's built-ins CPU meanings, split as the GPU build is (split.py): the kernels in a unit
that includes cuda_cpu.h without torch (under a second with its precompiled header), the wrapper in a
unit with torch's headers (precompiled), each launch a call of a stub in the kernels' unit. They are
linked with two cached objects: the runtime that runs a grid (cuda_cpu_runtime.cpp) and the Python
binding of cpp_src (once per cpp_src and funcs). So an edited kernel compiles only its own unit. A source
the split cannot follow is translated and compiled as one file.
"""
import ctypes
import os
import re
from pathlib import Path

import torch

from . import objects, split
from .errors import CompileError
from .nvcc import binding_job
from .source import (Edits, blank as _blank, close as _close, kernel_name_start as _kernel_name_start,
                     launch_parts, split_top)
from .toolkit import quiet_cpp_extension, torch_flags

HERE = Path(__file__).resolve().parent
HEADER = HERE / "cuda_cpu.h"
MINMAX = HERE / "cuda_minmax.h"  # cuda_cpu.h includes it
RUNTIME = HERE / "cuda_cpu_runtime.cpp"

# CUDA headers whose names cuda_cpu.h provides: their includes are dropped.
_PROVIDED = {
    "c10/cuda/CUDAException.h", "c10/cuda/CUDAStream.h", "ATen/cuda/CUDAContext.h", "ATen/cuda/Exceptions.h",
    "cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "device_launch_parameters.h", "device_functions.h",
    "math_constants.h", "vector_types.h", "driver_types.h", "builtin_types.h",
}
# CUDA-only headers that CPU mode cannot give: their includes become an #error on the same line.
_UNAVAILABLE = re.compile(r"^(c10/cuda/|ATen/cuda/|ATen/native/cuda/|cuda/|cub/|thrust/|cooperative_groups|cuda_|"
                          r"curand|cublas|cufft|cusparse|cusolver|cudnn|nvrtc|nvToolsExt|nvtx3|mma\.h|crt/|"
                          r"sm_\d+_|texture_|surface_)")


def _namespace_scope(code):
    """(offset, flags) at each brace of code: a flag per brace then open, True where it opens a namespace or extern "C"."""
    scopes, stack = [], []
    for m in re.finditer(r"[{}]", code):
        if m.group() == "{":
            before = code[max(0, m.start() - 200):m.start()]
            stack.append(bool(re.search(r'(\bnamespace(\s+[\w:]+)?|\bextern\s+"\s*")\s*$', before)))
        elif stack:
            stack.pop()
        scopes.append((m.start(), list(stack)))
    return scopes


def _at_namespace_scope(scopes, pos):
    stack = []
    for at, s in scopes:
        if at >= pos:
            break
        stack = s
    return all(stack)


def edits(src, launches=True):
    """The rewrites that make CUDA source C++ for cuda_cpu.h (launches too unless launches=False), lines kept."""
    code = _blank(src)
    out = Edits(src)

    # Includes of CUDA-only headers.
    for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"][^\n]*', code, re.M):
        name = src[m.start(1):m.end(1)].strip()  # from src: `code` has blanked "quoted" names
        if name in _PROVIDED:
            out.replace(m.start(), m.end(), f"/* {name}: given by cuda_cpu.h in CPU mode */")
        elif _UNAVAILABLE.match(name):
            out.replace(m.start(), m.end(), f'#error "{name} is not available in CPU mode: it needs a GPU"')

    # Launches: k<<<grid, block, shmem, stream>>>(args) -> ::cuda_cpu::make_launch("k", [&](...) {...}, grid, ...)(args)
    for m in re.finditer(r"<<<", code) if launches else ():
        close, paren = launch_parts(code, m.end())
        if paren < 0:
            continue
        start = _kernel_name_start(code, m.start())
        name = re.sub(r"\s+", "", src[start:m.start()])
        if not name or not (name[0].isalpha() or name[0] in "_:"):
            continue
        out.replace(start, close + 3,
                    f'::cuda_cpu::make_launch("{name}", [&](auto&&... cuda_cpu_args_) {{ {name}(cuda_cpu_args_...); }}, ',
                    (m.end(), close), ")")

    # extern __shared__ T s[];  -> a pointer to the launch's dynamic shared memory.
    scopes = None
    for m in re.finditer(r"\bextern\s+__shared__\s+((?:__align__\s*\(\s*\w+\s*\)|[^;{}()\[\]])*?)\s*\b([A-Za-z_]\w*)"
                         r"\s*\[\s*\]\s*;", code):
        ctype = re.sub(r"__align__\s*\(\s*\w+\s*\)", " ", src[m.start(1):m.end(1)]).strip()
        ctype = re.sub(r"\s+", " ", ctype)
        var = m.group(2)
        if scopes is None:
            scopes = _namespace_scope(code)
        if _at_namespace_scope(scopes, m.start()):
            text = f"static ::cuda_cpu::DynamicShared<{ctype}> {var};"
        else:
            text = f"{ctype}* {var} = ({ctype}*)::cuda_cpu::detail::dynamic_smem;"
        out.replace(m.start(), m.end(), text)

    # Each __shared__ array a function declares is marked, so a launch knows whether its kernel wrote
    # shared memory (the tiled exercises' check asks). The call goes after the ';', on the same line.
    scopes = scopes or _namespace_scope(code)
    for m in re.finditer(r"(?<![\w])__shared__\b((?:[^;{}()]|\([^()]*\))*);", code):
        before = code[max(0, m.start() - 40):m.start()]
        if re.search(r"\bextern\s+(?:(?:volatile|const|static)\s+)*$", before) or _at_namespace_scope(scopes, m.start()):
            continue
        names = [n.group(1) for n in (re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:=.*)?$", p.strip())
                                      for p in split_top(m.group(1))) if n]
        marks = "".join(f" ::cuda_cpu::detail::shared_mark(&{n}, sizeof({n}));" for n in names)
        out.replace(m.end(), m.end(), marks)

    # Each index variable a kernel declares (computed from threadIdx, blockIdx, blockDim or another such variable)
    # is reported to a watched thread (course/harness/origin.py runs one thread alone and reads them). After the
    # declaration's ';', on the same line.
    for name, quals, start, end in _functions(code):
        if "__global__" in quals:
            for at, names in _index_declarations(code, start, end):
                out.replace(at, at, "".join(f' ::cuda_cpu::detail::watch("{n}", {n});' for n in names))

    # `static __shared__` would be `static static`.
    for m in re.finditer(r"\bstatic\s+(?=(?:(?:volatile|const)\s+)*__shared__\b)|(?<=__shared__)\s+static\b", code):
        out.replace(m.start(), m.end(), " ")

    # Device checks: a tensor on the CPU is what CPU mode expects.
    for m in re.finditer(r"\bis_cuda\s*\(\s*\)", code):
        out.replace(m.start(), m.end(), "is_cpu()")
    for m in re.finditer(r"\bkCUDA\b", code):
        out.replace(m.start(), m.end(), "kCPU")
    for m in re.finditer(re.escape("must be a CUDA tensor"), src):
        out.replace(m.start(), m.end(), "must be a CPU tensor (CPU mode: no GPU here)")
    return out


_INDEX_TYPE = (r"(?:(?:const|volatile|register)\s+)*(?:(?:unsigned|signed)\s+)?(?:long\s+long|long|int|short|unsigned|"
               r"signed|size_t|ptrdiff_t|auto|u?int(?:8|16|32|64)_t)(?:\s+int)?")


def _index_declarations(code, start, end):
    """(where its ';' ends, [names]) of each statement in code[start:end] that declares variables computed from
    threadIdx, blockIdx or blockDim, or from variables so declared before (`int row = blockIdx.y*blockDim.y + ...;`)."""
    known, found = set(), []
    for m in re.finditer(rf"(?<=[;{{}}])(\s*){_INDEX_TYPE}\s+([^;{{}}]*);", code[start:end]):
        names = []
        for part in split_top(m.group(2)):
            d = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*(?:=|\{|\()(.*)", part, re.S)
            if d is None:
                break  # not a plain declaration (a function's, an array's): leave the statement alone
            used = set(re.findall(r"[A-Za-z_]\w*", d.group(2)))
            if used & {"threadIdx", "blockIdx", "blockDim"} or used & known:
                names.append(d.group(1))
        else:
            if names:
                known |= set(names)
                found.append((start + m.end(), names))
    return found


def translate(cuda_src):
    """The CUDA source as C++ for cuda_cpu.h: launches, extern __shared__, includes and device checks rewritten, lines kept."""
    return edits(cuda_src).apply()


_NOT_CALLS = {"if", "for", "while", "switch", "return", "sizeof", "alignof", "decltype", "static_cast",
              "reinterpret_cast", "const_cast", "dynamic_cast", "catch", "defined", "__attribute__",
              "__launch_bounds__", "__align__", "__builtin_align__", "noexcept", "throw", "new", "delete"}


def _functions(code):
    """(name, qualifiers, body start, body end) of each function defined at namespace scope in blanked code."""
    found, scopes = [], _namespace_scope(code)
    for m in re.finditer(r"\)\s*(?:const\s*|noexcept\s*|->\s*[\w:<>*&\s]+?)*\{", code):
        body = m.end() - 1
        if not _at_namespace_scope(scopes, body):
            continue
        depth, j = 0, m.start()
        while j >= 0:  # back to the parameter list's '('
            depth += code[j] == ")"
            depth -= code[j] == "("
            if depth == 0:
                break
            j -= 1
        name = re.search(r"([A-Za-z_]\w*)\s*$", code[:j])
        if not name or name.group(1) in _NOT_CALLS:
            continue
        start = max(code.rfind(c, 0, name.start()) for c in ";}{")
        line_start = code.rfind("\n#", 0, name.start())  # a preprocessor line ends a header too
        head = code[max(start, code.find("\n", line_start + 1) if line_start >= 0 else start) + 1:name.start()]
        quals = set(re.findall(r"__(?:global|device|host)__", head))
        found.append((name.group(1), quals, body, _close(code, body, "{}")))
    return found


def host_calls_from_device(cuda_src):
    """nvcc's errors for functions of cuda_src defined without __device__ and called from device code, which g++ alone accepts."""
    code = _blank(cuda_src)
    funcs = _functions(code)
    device = {n for n, q, _, _ in funcs if q & {"__device__", "__global__"}}
    host_only = {n for n, q, _, _ in funcs if not q & {"__device__", "__global__"}} - device
    errors = []
    for name, quals, start, end in funcs:
        if not quals & {"__device__", "__global__"} or "__host__" in quals:
            continue
        kind = "__global__" if "__global__" in quals else "__device__"
        for call in re.finditer(r"(?<![\w.>:])([A-Za-z_]\w*)\s*\(", code[start:end]):
            if call.group(1) in host_only:
                at = start + call.start(1)
                line = cuda_src.count("\n", 0, at) + 1
                col = at - (cuda_src.rfind("\n", 0, at) + 1) + 1
                errors.append(f'cuda_src:{line}:{col}: error: calling a __host__ function("{call.group(1)}") from a '
                              f'{kind} function("{name}") is not allowed (nvcc rejects it: mark '
                              f'{call.group(1)} __host__ __device__ to call it from both sides)')
    return errors


# -O1 runs the grayscale kernel on 6 million pixels in about 20 ms (-O0: 400 ms) for about a second more
# compile time than -O0; -O2 adds another two seconds and runs it no faster. opt=True asks for -O2.
# (`#pragma GCC optimize` in the kernel file alone was tried: it compiles slower and optimizes nothing.)
# The wrapper's unit (the split build) is always -O1, so one precompiled header serves both.
FLAGS, OPT_FLAGS = ["-O1"], ["-O2"]


def _compiler():
    return os.environ.get("CXX") or "c++"


def _base_flags():
    return [*torch_flags(quiet_cpp_extension()), f"-I{HERE}"]


def signature():
    """What a CPU-mode build depends on besides the sources: the compiler and the course's build files."""
    return objects.signature(_compiler())


# The binding file is compiled as a module named cuda_cpu_binding, and each module's PyInit_<name> is that
# module's PyInit_cuda_cpu_binding (objects.link). So the binding object depends only on cpp_src and funcs,
# and is reused by every build with the same ones: a student's next edit, or the next student's submission.
_BINDING_NAME = "cuda_cpu_binding"
KERNEL_HEADER, HOST_HEADER = "course_cpu_kernel.h", "course_cpu_host.h"


def _headers():
    """The text of the course's headers every CPU-mode unit includes (part of each compiled object's key)."""
    return HEADER.read_text() + MINMAX.read_text()


def _library_jobs(root, cpp_src, funcs):
    """The binding of cpp_src and the runtime that runs grids: cached objects every build links."""
    base = [_compiler(), *_base_flags()]
    binding = binding_job(root, [*base, "-O0"], cpp_src, funcs, _BINDING_NAME)
    runtime = objects.Job("runtime (g++)", [*base, "-O2", "-fvisibility=hidden"], RUNTIME.read_text(), ".cpp",
                          depends=_headers() + torch.__version__)
    runtime.text = f'#line 1 "{RUNTIME}"\n' + runtime.text
    return [binding, runtime]


def plan_jobs(root, cuda_src, cpp_src, funcs, opt, one_unit=None):
    """The compile jobs of a CPU-mode build: (jobs, how) with how "split" or "one unit: <why>"."""
    begin, body = split.parts(cuda_src)
    base = [_compiler(), *_base_flags()]
    kernel_flags = [*base, *(OPT_FLAGS if opt else FLAGS)]
    try:
        plan = split.analyse(cuda_src, one_unit)
    except split.Unsplittable as e:
        text, locate = split.whole_unit(begin, body, '#include "cuda_cpu.h"\n', edits)
        job = objects.Job("kernel+wrapper (g++)", kernel_flags, text, ".cpp", depends=_headers() + torch.__version__)
        job.locate = locate
        return [job, *_library_jobs(root, cpp_src, funcs)], f"one unit: {e}", None
    more = edits(body, launches=False)
    for start, end, pieces in more.edits:
        plan.host_edits.replace(start, end, *pieces)
        plan.device_edits.replace(start, end, *pieces)
    launch_decls = split.LAUNCH_DECLS
    kernel_header = f'#define CUDA_CPU_NO_TORCH\n#include "cuda_cpu.h"\n{translate(split.light_begin(begin))}\n{launch_decls}'
    host_header = f'#include "cuda_cpu.h"\n{translate(begin)}\n{launch_decls}'
    headers = _headers() + torch.__version__
    host_flags = [*base, "-O1"]
    kdir = objects.precompiled(root, KERNEL_HEADER, kernel_header, kernel_flags, headers)
    hdir = objects.precompiled(root, HOST_HEADER, host_header, host_flags, headers)
    device = split.unit_job(plan, "device", "kernel (g++)", f'#include "{KERNEL_HEADER}"\n',
                            [*kernel_flags, f"-I{kdir}"], ".cpp", kernel_header + headers,
                            pch=objects.pch_ready(kdir, KERNEL_HEADER), launch=split.cpu_launch)
    host = split.unit_job(plan, "host", "wrapper (g++)", f'#include "{HOST_HEADER}"\n', [*host_flags, f"-I{hdir}"],
                          ".cpp", host_header + headers, pch=objects.pch_ready(hdir, HOST_HEADER))
    return [device, host, *_library_jobs(root, cpp_src, funcs)], "split", plan


def build(name, build_dir, cuda_src, cpp_src, funcs, flags, verbose=False):
    """Compiles a CPU-mode module: cuda_src's units with g++ (translated), linked with the binding of cpp_src and the runtime.

    Returns (module, report): report holds how it was built and the seconds of each step.
    """
    begin, body = split.parts(cuda_src)
    rejected = host_calls_from_device(body)
    if rejected:  # g++ would build it; nvcc would not: a source must not work in one mode only
        raise objects.BuildFailed([objects.Job("kernel (g++)", [_compiler()], "", ".cpp", output="\n".join(rejected))])
    cpp_extension = quiet_cpp_extension()
    ldflags = [f"-L{lib}" for lib in cpp_extension.library_paths("cpu")] + ["-lc10", "-ltorch_cpu", "-ltorch",
                                                                           "-ltorch_python"]
    # the kernels' unit lacks torch's headers: a kernel that used what they declare is built as one unit
    return split.build_module(name, build_dir, lambda one_unit=None: plan_jobs(
        build_dir.parent, cuda_src, cpp_src, funcs, bool(flags), one_unit=one_unit), ldflags, _BINDING_NAME, verbose,
        fast=True)


def launch_count(module):
    """How many kernels a CPU-mode module has launched in this process."""
    lib = ctypes.CDLL(module.__file__)
    lib.cuda_cpu_launch_count.restype = ctypes.c_longlong
    return int(lib.cuda_cpu_launch_count())


def is_cpu_module(module):
    """True when module was built by load_cuda's CPU mode (its kernels run on the CPU)."""
    try:
        return hasattr(ctypes.CDLL(module.__file__), "cuda_cpu_launch_count")
    except (OSError, AttributeError, TypeError):
        return False

"""load_cuda's CPU mode: a student's unchanged CUDA C, translated to C++ and run on the CPU.

translate() rewrites the few things C++ cannot read (kernel launches, `extern __shared__`, CUDA-only
includes, device checks), keeping every line where it was, so compiler messages name the student's
lines. g++ compiles the result against cuda_cpu.h, which gives CUDA's built-ins CPU meanings (one
file per build, through torch.utils.cpp_extension.load), and links it with two cached objects: the
runtime that runs a grid (cuda_cpu_runtime.cpp, once per build folder) and the Python binding of
cpp_src (once per cpp_src and funcs, so an edited kernel compiles only its own file).
"""
import ctypes
import hashlib
import logging
import os
import re
import subprocess
import sysconfig
import tempfile
import warnings
from pathlib import Path

import torch

from .errors import CompileError
from .nvcc import binding_source
from .toolkit import quiet_cpp_extension

HERE = Path(__file__).resolve().parent
HEADER = HERE / "cuda_cpu.h"
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


def _blank(src):
    """src with comments and string and character literals blanked to spaces (newlines kept): where the code is."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == '"' and i > 0 and src[i - 1] == "R" and not (i > 1 and (src[i - 2].isalnum() or src[i - 2] == "_")
                                                             and src[i - 2] not in "uUL8"):
            m = re.match(r'"([^()\\\s]{0,16})\(', src[i:])
            if not m:
                i += 1
                continue
            end = src.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            blank(i + 1, j - 1)
            i = j
        elif c in "\"'":
            if c == "'":
                j = i
                while j > 0 and (src[j - 1].isalnum() or src[j - 1] in "_.'"):
                    j -= 1
                if j < i and src[j].isdigit():
                    i += 1  # a digit separator (1'000), not a character literal
                    continue
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _kernel_name_start(code, end):
    """Where the kernel's name ends before `<<<` at end begins: `k`, `ns::k`, `k<float, 4>`."""
    i = end
    while i > 0 and code[i - 1].isspace():
        i -= 1
    if i > 0 and code[i - 1] == ">":  # template arguments
        depth = 0
        while i > 0:
            i -= 1
            if code[i] == ">":
                depth += 1
            elif code[i] == "<":
                depth -= 1
                if depth == 0:
                    break
        while i > 0 and code[i - 1].isspace():
            i -= 1
    while i > 0 and (code[i - 1].isalnum() or code[i - 1] in "_:"):
        i -= 1
    return i


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


def translate(cuda_src):
    """The CUDA source as C++ for cuda_cpu.h: launches, extern __shared__, includes and device checks rewritten, lines kept."""
    src = cuda_src
    code = _blank(src)
    edits = []  # (start, end, replacement), replacement keeps the newlines of src[start:end]

    def keep_lines(start, end, text):
        return text + "\n" * (src.count("\n", start, end) - text.count("\n"))

    # Includes of CUDA-only headers.
    for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"][^\n]*', code, re.M):
        name = src[m.start(1):m.end(1)].strip()  # from src: `code` has blanked "quoted" names
        if name in _PROVIDED:
            edits.append((m.start(), m.end(), f"/* {name}: given by cuda_cpu.h in CPU mode */"))
        elif _UNAVAILABLE.match(name):
            edits.append((m.start(), m.end(), f'#error "{name} is not available in CPU mode: it needs a GPU"'))

    # Launches: k<<<grid, block, shmem, stream>>>(args) -> ::cuda_cpu::make_launch("k", [&](...) {...}, grid, ...)(args)
    for m in re.finditer(r"<<<", code):
        close = code.find(">>>", m.end())
        if close < 0:
            continue
        after = close + 3
        while after < len(code) and code[after].isspace():
            after += 1
        if after >= len(code) or code[after] != "(":
            continue
        start = _kernel_name_start(code, m.start())
        name = re.sub(r"\s+", "", src[start:m.start()])
        if not name or not (name[0].isalpha() or name[0] in "_:"):
            continue
        config = src[m.end():close]
        text = (f'::cuda_cpu::make_launch("{name}", [&](auto&&... cuda_cpu_args_) {{ {name}(cuda_cpu_args_...); }}, '
                f"{config})")
        edits.append((start, close + 3, keep_lines(start, close + 3, text)))

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
        edits.append((m.start(), m.end(), keep_lines(m.start(), m.end(), text)))

    # Each __shared__ array a function declares is marked, so a launch knows whether its kernel wrote
    # shared memory (the tiled exercises' check asks). The call goes after the ';', on the same line.
    scopes = scopes or _namespace_scope(code)
    for m in re.finditer(r"(?<![\w])__shared__\b((?:[^;{}()]|\([^()]*\))*);", code):
        before = code[max(0, m.start() - 40):m.start()]
        if re.search(r"\bextern\s+(?:(?:volatile|const|static)\s+)*$", before) or _at_namespace_scope(scopes, m.start()):
            continue
        parts, depth, cur = [], 0, ""
        for ch in m.group(1):
            depth += ch in "[(<"
            depth -= ch in "])>"
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        names = [n.group(1) for n in (re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:=.*)?$", p.strip())
                                      for p in parts) if n]
        marks = "".join(f" ::cuda_cpu::detail::shared_mark(&{n}, sizeof({n}));" for n in names)
        edits.append((m.end(), m.end(), marks))

    # `static __shared__` would be `static static`.
    for m in re.finditer(r"\bstatic\s+(?=(?:(?:volatile|const)\s+)*__shared__\b)|(?<=__shared__)\s+static\b", code):
        edits.append((m.start(), m.end(), keep_lines(m.start(), m.end(), " ")))

    # Device checks: a tensor on the CPU is what CPU mode expects.
    for m in re.finditer(r"\bis_cuda\s*\(\s*\)", code):
        edits.append((m.start(), m.end(), "is_cpu()"))
    for m in re.finditer(r"\bkCUDA\b", code):
        edits.append((m.start(), m.end(), "kCPU"))

    edits.sort()
    out, at = [], 0
    for start, end, text in edits:
        if start < at:  # overlapping rewrites: keep the first
            continue
        out.append(src[at:start])
        out.append(text)
        at = end
    out.append(src[at:])
    text = "".join(out)
    text = text.replace("must be a CUDA tensor", "must be a CPU tensor (CPU mode: no GPU here)")
    return text


_NOT_CALLS = {"if", "for", "while", "switch", "return", "sizeof", "alignof", "decltype", "static_cast",
              "reinterpret_cast", "const_cast", "dynamic_cast", "catch", "defined", "__attribute__",
              "__launch_bounds__", "__align__", "__builtin_align__", "noexcept", "throw", "new", "delete"}


def _close(code, i, pair):
    """The index just past the bracket matching code[i]."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == pair[0]:
            depth += 1
        elif code[j] == pair[1]:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


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


def kernel_file(cuda_src):
    """The C++ file CPU mode compiles for cuda_src: the header, then the translated source under `#line 1 "cuda_src"`."""
    return f'#include "cuda_cpu.h"\n#line 1 "cuda_src"\n{translate(cuda_src)}\n'


# -O1 runs the grayscale kernel on 6 million pixels in about 20 ms (-O0: 400 ms) for about a second more
# compile time than -O0; -O2 adds another two seconds and runs it no faster. opt=True asks for -O2.
# (`#pragma GCC optimize` in the kernel file alone was tried: it compiles slower and optimizes nothing.)
FLAGS, OPT_FLAGS = ["-O1"], ["-O2"]


def _compiler():
    return os.environ.get("CXX") or "c++"


def _base_flags():
    cpp_extension = quiet_cpp_extension()
    flags = ["-fPIC", "-std=c++20", "-DTORCH_API_INCLUDE_EXTENSION_H", f"-I{HERE}"]
    for inc in cpp_extension.include_paths("cpu") + [sysconfig.get_path("include", scheme="posix_prefix")]:
        flags += ["-isystem", inc]
    if not torch._C._GLIBCXX_USE_CXX11_ABI:
        flags.append("-D_GLIBCXX_USE_CXX11_ABI=0")
    return flags


def signature():
    """A hash of what every CPU-mode build depends on besides the student's source: this file, header, runtime, compiler, torch."""
    try:
        version = subprocess.run([_compiler(), "--version"], capture_output=True, text=True).stdout
    except OSError:
        version = ""
    key = "\0".join([torch.__version__, version, Path(__file__).read_text(), HEADER.read_text(),
                     RUNTIME.read_text()])
    return hashlib.sha256(key.encode()).hexdigest()[:12]


# The binding file is compiled as a module named cuda_cpu_binding; each module's PyInit_<name> (in its
# kernel file) hands over to it. So the binding object depends only on cpp_src and funcs, and is reused
# by every build with the same ones: a student's next edit, or the next student's submission.
_BINDING_NAME = "cuda_cpu_binding"


def _objects(build_root, main_cpp):
    """The runtime and binding objects, compiled (at the same time) where not yet cached; returns their paths."""
    cache = Path(build_root) / f"cuda_cpu_objects_{signature()}"
    cache.mkdir(parents=True, exist_ok=True)
    runtime = cache / "cuda_cpu_runtime.o"
    binding = cache / f"binding_{hashlib.sha256(main_cpp.encode()).hexdigest()[:16]}.o"
    jobs = []
    if not runtime.exists():
        jobs.append((runtime, str(RUNTIME), ["-O2", "-fvisibility=hidden"]))
    if not binding.exists():
        source = binding.with_suffix(".cpp")
        if not source.exists() or source.read_text() != main_cpp:
            source.write_text(main_cpp)
        jobs.append((binding, str(source), ["-O0", f"-DTORCH_EXTENSION_NAME={_BINDING_NAME}"]))
    running = []
    for obj, source, flags in jobs:
        fd, tmp = tempfile.mkstemp(suffix=".o", dir=cache)
        os.close(fd)
        cmd = [_compiler(), *_base_flags(), *flags, "-c", source, "-o", tmp]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as e:
            os.unlink(tmp)
            raise CompileError(f"CPU mode needs a C++ compiler (g++), and `{cmd[0]}` could not be run: {e}. "
                               "Install g++, or set CXX to your C++ compiler.") from None
        running.append((obj, tmp, cmd, proc))
    failures = []
    for obj, tmp, cmd, proc in running:
        output, _ = proc.communicate()
        if proc.returncode == 0:
            os.chmod(tmp, 0o644)
            os.replace(tmp, obj)  # atomic: a process building at the same time finds a whole file or none
        else:
            os.unlink(tmp)
            failures.append((obj, cmd, output))
    for obj, cmd, output in failures:
        if obj == runtime:
            raise CompileError("CPU mode could not compile its runtime (course/build/cuda_cpu_runtime.cpp); this is "
                               "the course's code, not yours:\n" + " ".join(cmd) + "\n" + output)
        raise RuntimeError(f"Error building the binding of cpp_src:\n{output}")  # load_cuda reads the errors
    return runtime, binding


def build(name, build_dir, cuda_src, cpp_src, funcs, flags, verbose=False):
    """Compiles a CPU-mode module: the translated cuda_src with g++, linked with the binding of cpp_src and the runtime."""
    cpp_extension = quiet_cpp_extension()
    opt = bool(flags)
    rejected = host_calls_from_device(cuda_src)
    if rejected:  # g++ would build it; nvcc would not: a source must not work in one mode only
        raise RuntimeError("\n".join(rejected))  # load_cuda shows them as compiler errors
    runtime, binding = _objects(build_dir.parent, binding_source(cpp_src, funcs))
    kernel = build_dir / "kernel.cpp"
    text = (kernel_file(cuda_src) + f'#line 1 "{_BINDING_NAME}"\n'
            f'extern "C" struct _object* PyInit_{_BINDING_NAME}();\n'
            f'extern "C" __attribute__((visibility("default"))) struct _object* PyInit_{name}() '
            f'{{ return PyInit_{_BINDING_NAME}(); }}\n')
    if not kernel.exists() or kernel.read_text() != text:
        kernel.write_text(text)
    log = logging.getLogger("torch.utils.cpp_extension")
    level = log.level
    if not verbose:
        log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            if not verbose:
                warnings.simplefilter("ignore")
            # -Bsymbolic: PyInit_cuda_cpu_binding is in every CPU-mode module; each calls its own.
            return cpp_extension.load(name=name, sources=[str(kernel)], extra_cflags=OPT_FLAGS if opt else FLAGS,
                                      extra_include_paths=[str(HERE)],
                                      extra_ldflags=[str(binding), str(runtime), "-Wl,-Bsymbolic"],
                                      build_directory=str(build_dir), with_cuda=False, verbose=verbose)
    finally:
        log.setLevel(level)


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

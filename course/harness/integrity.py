"""Whether an answer computes with a kernel of its own: evidence from outside (the compiled objects' symbols), and the
kernels and PyTorch operations a profiled call ran, which can fail an answer but never pass one alone.

The profiler's events are recorded in the process that runs the student's code, which can forge them (a C++ wrapper,
through pybind11, can patch torch.profiler there). So the passing side rests on what the judge reads itself: the
object files load_cuda linked the module from (objects.linked), whose symbols (nm) say what the student's wrapper
calls. It must launch through a kernel stub of its own (the split build's `__course_launch_<kernel>::run`, defined
in the kernels' object; in a one-unit build, nvcc's `__device_stub__` or CPU mode's cuda_cpu launch), and neither
its object nor the kernels' may call a PyTorch operation that computes (at::_ops::<op> beyond ALLOWED_OPS), PyTorch's
dispatcher, a library's kernels (cuBLAS, cuDNN), Python, or a function looked up at run time (dlsym).
"""
from dataclasses import dataclass
import functools
import re
import subprocess

import torch

from .exercise import same

# Creating the output and viewing tensors is the wrapper's job; computing is the kernel's. Immutable:
# a solution cell must not be able to widen it.
ALLOWED_OPS = frozenset("aten::" + op for op in (
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "zero_", "fill_", "ones", "full",
    "view", "reshape", "_reshape_alias", "_unsafe_view", "as_strided", "select", "slice", "flatten",
    "unsqueeze", "squeeze", "expand", "contiguous", "alias", "detach", "resize_", "t", "transpose",
    "permute", "narrow", "lift_fresh", "to", "size", "stride", "numel", "data_ptr", "set_"))
# The kernels PyTorch launches for the allowed operations (zeros, fill_, contiguous copies).
# fills and copies compute nothing; nor do the runtime's copies and sets (cudaMemcpy, cudaMemcpyToSymbol, cudaMemset)
_ALLOWED_FOREIGN = re.compile(r"at::native::.*(Fill|fill|copy|Copy)|^Mem(cpy|set)\b")
from .wire import CPU_LAUNCH, CPU_SHARED, LAUNCHES, TRITON_LAUNCH  # noqa: F401 (the ranges' names)


def base_name(kernel):
    """A kernel's name without return type, namespace, template arguments and parameters: `void k<16>(float*)` -> `k`."""
    depth, cut = 0, len(kernel)
    for i, c in enumerate(kernel):  # the parameter list: the first '(' outside template brackets
        depth += c == "<"
        depth -= c == ">"
        if c == "(" and depth == 0:
            cut = i
            break
    head = re.sub(r"<[^<>]*>", "", kernel[:cut])
    while "<" in head:
        head = re.sub(r"<[^<>]*>", "", head)
    return head.split()[-1].split("::")[-1] if head.split() else kernel


def module_kernels(path):
    """The base names of the __global__ functions compiled into a module (nvcc leaves a host stub for each)."""
    try:
        symbols = subprocess.run(["nm", "--defined-only", str(path)], capture_output=True, text=True).stdout
    except OSError:
        return None
    # nvcc's host stub of each kernel: `__device_stub__Z<mangled kernel>`, itself mangled as a function
    mangled = ["_" + m for m in re.findall(r"^\S+\s+[tTwW]\s+(?:_ZL?\d+)?__device_stub__(Z\w+)$", symbols, re.M)]
    if not mangled:
        return set()
    try:
        names = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True).stdout.split("\n")
    except OSError:
        return None
    return {base_name(n) for n in names if n}


@dataclass(frozen=True)
class Evidence:
    """What a module's object files show, read by the judge: the kernels the wrapper launches through a stub of its
    own, and what in the student's objects computes some other way ((symbol, what it is) pairs)."""
    launches: tuple
    computing: tuple


@functools.lru_cache(maxsize=1)
def _aten():
    """({at::_ops struct name: "aten::op"}, the struct names ALLOWED_OPS allow, every aten op's base name)."""
    import torch
    ops, allowed, names = {}, set(), set()
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        base = schema.name.split("::", 1)[1]
        struct = f"{base}_{schema.overload_name}" if schema.overload_name else base
        ops[struct] = schema.name
        names.add(base)
        if schema.name in ALLOWED_OPS:
            allowed.add(struct)
    return ops, frozenset(allowed), frozenset(names)


_OP = re.compile(r"^(?:\S+ )?at::_ops::(\w+)::(?:call|redispatch)\(")
_BACKEND_OP = re.compile(r"^(?:\S+ )?at::(?:native|cpu|cuda|meta|composite\w*)::(\w+)\(")
_OTHER = ((re.compile(r"^(?:\S+ )?(?:c10::Dispatcher::|c10::OperatorHandle::|c10::impl::OperatorEntry::|torch::jit::)"
                      r"\w[\w:<>, ]*\("), "PyTorch's dispatcher"),  # its functions; torch's headers define jit constants
          # what runs Python code (legitimate wrappers reference much of Python's API through torch's headers)
          (re.compile(r"^_?Py(?:Import_|Run_|_Compile|Eval_EvalCode|Eval_CallObject|Object_Call|Object_Vectorcall|"
                      r"Vectorcall_Call|CFunction_Call)|pybind11::module_::import|pybind11::(?:exec|eval)\b|"
                      r"pybind11::detail::object_api<.*>::operator\(\)"), "Python"),
          (re.compile(r"^(?:dlopen|dlmopen|dlsym|dlvsym)$"), "a function looked up at run time"),
          (re.compile(r"^(?:cublas|cudnn|cufft|curand|cusparse|cusolver)\w*$|at::cuda::blas::|BlasHandle|BlasLtHandle"),
           "a library's kernels"))
_STUB_CALL = re.compile(r"^__course_launch_(\w+)(?:<.*>)?::run\(")
_DEVICE_STUB = re.compile(r"__device_stub__(Z\w+)")
_CPU_LAUNCH = "cuda_cpu::detail::launch("


def computing(symbol):
    """What a symbol of the student's objects computes with, in words (e.g. "aten::mul"), or None for nothing."""
    ops, allowed, names = _aten()
    found = _OP.match(symbol)
    if found:
        return None if found.group(1) in allowed else ops.get(found.group(1), f"aten::{found.group(1)}")
    found = _BACKEND_OP.match(symbol)
    if found and found.group(1) in names and f"aten::{found.group(1)}" not in ALLOWED_OPS:
        return f"aten::{found.group(1)}"
    return next((what for pattern, what in _OTHER if pattern.search(symbol)), None)


def _stub_name(mangled):
    """The kernel's name in nvcc's stub name `Z<length><name>...` (the mangled name as it is, if it is not so)."""
    found = re.match(r"Z(\d+)", mangled)
    return mangled[found.end():found.end() + int(found.group(1))] if found else mangled


def object_evidence(module):
    """The Evidence of a module load_cuda built (its file), from its object files' symbols; None when they cannot be
    read (a module built before the course noted its objects, or objects gone)."""
    from ..toolchain import objects
    roles = objects.linked(module)
    if roles is None:
        return None
    read = {}
    for role in ("wrapper", "kernel", "kernel+wrapper"):
        for obj in roles.get(role, []):
            found = objects.symbols(obj)
            if found is None:
                return None
            read[obj] = (role, *found)
    if not any(role != "kernel" for role, _, _ in read.values()):
        return None
    stubs = set().union(*(defined for role, defined, _ in read.values() if role == "kernel"))
    launches, computes = [], []
    for obj, (role, defined, undefined) in read.items():
        for symbol in sorted(defined | undefined):
            what = computing(symbol)
            if what:
                computes.append((symbol, what))
        if role == "wrapper":  # the split build: a call of a stub the kernels' object defines
            launches += [m.group(1) for m in map(_STUB_CALL.match, sorted(undefined)) if m and m.string in stubs]
        elif role == "kernel+wrapper":  # one unit: nvcc's stub of each kernel, or CPU mode's launch
            launches += [_stub_name(m.group(1)) for m in map(_DEVICE_STUB.search, sorted(defined)) if m]
            launches += ["a kernel"] * any(s.startswith(_CPU_LAUNCH) for s in undefined)
    return Evidence(tuple(dict.fromkeys(launches)), tuple(dict.fromkeys(computes)))


def kernels(events, own_names):
    """(own, foreign) kernel names launched in events; own ones come from the student's module (CPU mode: all)."""
    launched = [name for kind, name in events if kind == "cuda"]
    cpu = [name.split("::", 1)[1] for kind, name in events if kind == "cpu" and name.startswith(LAUNCHES)]
    if own_names is None:  # nm could not read the module: fall back to PyTorch's and libraries' names
        own = [k for k in launched if not re.search(r"at::|at_cuda_detail|cub::|cublas|cudnn|cutlass|nvjet|sm90_", k)]
    else:
        own = [k for k in launched if base_name(k) in own_names]
    foreign = [k for k in launched if k not in own and not _ALLOWED_FOREIGN.search(k)]
    return own + cpu, foreign


def shared_users(events):
    """The kernels that used shared memory in a profiled call (GPU: declared any; CPU mode: wrote some)."""
    return {name.split("::", 1)[1] for kind, name in events if kind == "shared" or name.startswith(CPU_SHARED)}


def torch_ops(events):
    """The PyTorch operations a profiled call ran that compute (anything beyond creating and viewing)."""
    return sorted({name for kind, name in events
                   if kind == "cpu" and name.startswith("aten::") and name not in ALLOWED_OPS})


def judge(func, where, run, own_names, needs_shared=False, what_computes="every output element", words=None,
          evidence=None):
    """Raises AssertionError unless the run computed with a kernel of the student's own, and gave the same answer twice.
    evidence: the module's Evidence (object_evidence), which alone can pass it; the profiled run's events, recorded
    where the student's code ran, can only fail it. words: how the rung launches and creates its output (a Rung's
    words; the CUDA rung's by default)."""
    if words is None:
        from .rungs import CUDA  # rungs.py imports this module
        words = CUDA.words
    computes = (f"Hint: this exercise is the kernel: the wrapper only creates the output ({words['create']}) and "
                f"launches your kernel, which computes {what_computes}.")
    none_of_its_own = (f"{func} launched no kernel of its own for {where}. Hint: the output must come from your "
                       f"kernel: {words['launch']}.")
    if evidence is not None:
        ops = sorted({what for _, what in evidence.computing if what.startswith("aten::")})
        if ops:
            raise AssertionError(f"{func} computed with the PyTorch operation(s) {', '.join(ops)} for {where} (your "
                                 f"compiled code calls {evidence.computing[0][0].split('(')[0]}). {computes}")
        if evidence.computing:
            symbol, what = evidence.computing[0]
            raise AssertionError(f"{func} calls {what} from its compiled code ({symbol.split('(')[0]}), for {where}. "
                                 f"{computes}")
        if not evidence.launches:
            raise AssertionError(none_of_its_own)
    ops = torch_ops(run.events)
    own, foreign = kernels(run.events, own_names)
    if ops:
        raise AssertionError(f"{func} computed with the PyTorch operation(s) {', '.join(ops)} for {where}. {computes}")
    if foreign:
        raise AssertionError(f"{func} launched a kernel that is not in your source ({foreign[0]}) for {where}. "
                             "Hint: a library (cuBLAS, PyTorch) may not compute the answer here: your own kernel must.")
    if not own:
        raise AssertionError(none_of_its_own)
    if needs_shared and not shared_users(run.events):
        raise AssertionError(f"{func}'s kernel ({own[0]}) did not use shared memory for {where}, and this exercise "
                             "asks for it. Hint: load the values a block's threads share (a tile, a row's partial "
                             "results) into a __shared__ array, wait with __syncthreads() until every thread has "
                             f"written its part, then compute {what_computes} from that array; a kernel that reads "
                             "only global memory does not use it.")
    first, again = run.value, run.again
    if isinstance(first, torch.Tensor) and isinstance(again, torch.Tensor) and first.shape == again.shape \
            and not same(first, again):
        differ = (first != again) & ~(first.isnan() & again.isnan()) if first.dtype.is_floating_point else first != again
        idx = differ.nonzero()[0].tolist() if differ.any() else [0] * first.dim()
        raise AssertionError(
            f"{func} gave different outputs in two runs on the same input for {where}: "
            f"{int(differ.sum()):,} values differ, the first at index {idx}: {first[tuple(idx)].item()}, "
            f"then {again[tuple(idx)].item()}.\nHint: either a race (threads write the same place, or read what "
            "other threads write, in an order that changes from run to run) or a read of memory that holds nothing "
            "defined (outside the tensors, or output not yet written): the memory check tells the two apart.")

"""Which kernels and PyTorch operations a profiled call ran: the student's own kernels are told apart by their module."""
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
CPU_LAUNCH, CPU_SHARED = "cuda_cpu_launch::", "cuda_cpu_shared::"
TRITON_LAUNCH = "triton_launch::"  # the profiler range around each launch of a student's @triton.jit kernel
LAUNCHES = (CPU_LAUNCH, TRITON_LAUNCH)  # ranges named after the student's kernel: a launch of their own


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


def judge(func, where, run, own_names, needs_shared=False, what_computes="every output element", words=None):
    """Raises AssertionError unless the profiled run computed with a kernel of the student's own, and gave the same answer
    twice; words: how the rung launches and creates its output (a Rung's words; the CUDA rung's by default)."""
    if words is None:
        from .rungs import CUDA  # rungs.py imports this module
        words = CUDA.words
    ops = torch_ops(run.events)
    own, foreign = kernels(run.events, own_names)
    if ops:
        raise AssertionError(f"{func} computed with the PyTorch operation(s) {', '.join(ops)} for {where}. "
                             "Hint: this exercise is the kernel: the wrapper only creates the output "
                             f"({words['create']}) and launches your kernel, which computes {what_computes}.")
    if foreign:
        raise AssertionError(f"{func} launched a kernel that is not in your source ({foreign[0]}) for {where}. "
                             "Hint: a library (cuBLAS, PyTorch) may not compute the answer here: your own kernel must.")
    if not own:
        raise AssertionError(f"{func} launched no kernel of its own for {where}. Hint: the output must come "
                             f"from your kernel: {words['launch']}.")
    if needs_shared and not shared_users(run.events):
        raise AssertionError(f"{func}'s kernel ({own[0]}) did not use shared memory for {where}. Hint: the tiled "
                             "kernel loads each tile into a __shared__ array, waits with __syncthreads(), and "
                             "computes from the tile; a kernel that reads only global memory is the naive one.")
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

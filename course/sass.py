"""The instructions a kernel becomes: PTX from `nvcc -ptx`, SASS from `cuobjdump -sass` of a built module (taught in drills/01).

PTX is the virtual instruction set nvcc writes first; SASS is what the GPU really runs, made from the PTX
by ptxas. Both show whether `a*b + c` became one fused multiply-add (PTX `fma.rn.f32`, SASS `FFMA`) or a
multiply and an add (`mul`/`add`, `FMUL`/`FADD`).
"""
import os
import re
import subprocess
import tempfile
from collections import Counter

import torch

from .toolchain.toolkit import cuda_tool
from .device import GPUNeeded, cpu_mode

# float32 arithmetic: PTX opcodes (fma.rn.f32, mul.f32, add.rn.f32, ...) and SASS ones (FFMA, FMUL, FADD)
_PTX_OP = re.compile(r"\b((?:fma|mul|add|sub)(?:\.r[nzmp])?(?:\.ftz)?(?:\.sat)?\.f32)\b")
_SASS_OP = re.compile(r"\b(FFMA|FMUL|FADD)(?:\.[A-Z0-9_.]+)?\b")


class ToolMissing(RuntimeError):
    """A CUDA toolkit program (nvcc, cuobjdump) that is not installed here."""


def _arch():
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return "sm_90"  # the course's GPU host, an H200


def _functions(cuda_src, qualifier):
    """The full text of each function of cuda_src declared with qualifier (e.g. __global__), comments removed."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", cuda_src, flags=re.S)
    out = []
    for m in re.finditer(rf"(?:template\s*<[^>]*>\s*)?(?:__host__\s+)?{qualifier}\b[^;{{]*?\)\s*(?:const\s*)?\{{", code):
        depth, j = 0, m.end() - 1
        for j in range(m.end() - 1, len(code)):
            depth += code[j] == "{"
            depth -= code[j] == "}"
            if depth == 0:
                break
        out.append(code[m.start():j + 1])
    return out


def kernel_source(cuda_src):
    """The kernels of cuda_src (its __device__ and __global__ functions) without the torch code around them: what ptx() compiles."""
    device = [f for f in _functions(cuda_src, "__device__") if "__global__" not in f]
    kernels = _functions(cuda_src, "__global__")
    if not kernels:
        raise ValueError("no __global__ function in this source: pass the source that holds your kernel")
    return "#include <cuda_runtime.h>\n#include <cstdio>\n" + "\n\n".join(device + kernels) + "\n"


def ptx(cuda_src, fmad=True, arch=None):
    """The PTX nvcc makes of cuda_src's kernels (fmad=False: with `-fmad=false`); needs nvcc, not a GPU (taught in drills/01)."""
    nvcc = cuda_tool("nvcc")
    if nvcc is None:
        raise ToolMissing("ptx() needs nvcc, the CUDA compiler, and it is not installed here (no CUDA toolkit); "
                          "on a machine with the toolkit it runs, GPU or not")
    with tempfile.TemporaryDirectory(prefix="course-ptx-") as tmp:
        src, out = os.path.join(tmp, "kernels.cu"), os.path.join(tmp, "kernels.ptx")
        with open(src, "w") as f:
            f.write(kernel_source(cuda_src))
        cmd = [nvcc, "-ptx", f"-arch={arch or _arch()}", f"-fmad={'true' if fmad else 'false'}", "-O3", src, "-o", out]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError("nvcc -ptx could not compile the kernels on their own (ptx() compiles only the "
                               "__global__ and __device__ functions of the source):\n" + proc.stderr[-2000:])
        with open(out) as f:
            return f.read()


def sass_of(module, kernel=None):
    """The SASS (machine code) of a module load_cuda built for the GPU, by cuobjdump -sass; kernel: only its (taught in drills/01)."""
    if cpu_mode():
        raise GPUNeeded("SASS is the machine code of an NVIDIA GPU; in CPU mode load_cuda builds your kernels for "
                        "the CPU, so there is none to show")
    tool = cuda_tool("cuobjdump")
    if tool is None:
        raise ToolMissing("sass_of() needs cuobjdump from the CUDA toolkit, and it is not installed here")
    path = getattr(module, "__file__", None)
    if not path:
        raise TypeError(f"pass the module load_cuda returned, not {type(module).__name__}")
    proc = subprocess.run([tool, "-sass", path], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump -sass failed: {proc.stderr.strip()[-1000:]}")
    if kernel is None:
        return proc.stdout
    sections = re.split(r"(?=^\s*Function : )", proc.stdout, flags=re.M)
    mine = [s for s in sections if re.match(rf"\s*Function : \S*{len(kernel)}{re.escape(kernel)}", s)
            or re.match(rf"\s*Function : {re.escape(kernel)}\b", s)]
    if not mine:
        names = re.findall(r"Function : (\S+)", proc.stdout)
        raise ValueError(f"no kernel {kernel!r} in this module's SASS; it has {', '.join(names) or 'none'}")
    return "".join(mine)


def float_ops(text):
    """How many of each float32 arithmetic instruction a PTX or SASS listing holds, e.g. {'FFMA': 2, 'FMUL': 1}."""
    found = _SASS_OP.findall(text) or _PTX_OP.findall(text)
    return dict(Counter(found))


def arithmetic(text):
    """The lines of a PTX or SASS listing that do float32 arithmetic, stripped."""
    return [ln.strip() for ln in text.splitlines() if _SASS_OP.search(ln) or _PTX_OP.search(ln)]


# a fused multiply-add in PTX, float32 or float64 (nvcc contracts double arithmetic too)
_PTX_FMA = re.compile(r"\b(?:fma|mad)(?:\.r[nzmp])?(?:\.ftz)?(?:\.sat)?\.f(?:32|64)\b")


def contracted_fmas(cuda_src):
    """How many multiply-adds nvcc fuses in cuda_src's kernels that the source does not write as fma (PTX with and without -fmad)."""
    return max(0, len(_PTX_FMA.findall(ptx(cuda_src))) - len(_PTX_FMA.findall(ptx(cuda_src, fmad=False))))


def warn_cpu_fma(cuda_src):
    """In CPU mode, prints one line saying whether a GPU would fuse multiply-adds that CPU mode does not (taught in drills/01)."""
    if not cpu_mode():
        return  # the kernel ran on the GPU: the bytes you saw are the GPU's
    try:
        fused = contracted_fmas(cuda_src)
    except (ToolMissing, RuntimeError) as e:
        print(f"Cannot tell whether a GPU would fuse this kernel's multiply-adds: {str(e).splitlines()[0]}")
        return
    if fused:
        print(f"Warning: on a GPU nvcc fuses {fused} of this kernel's multiply-adds (fma in its PTX) and CPU mode "
              "does not, so bytes that match here can differ on a GPU, where the grader runs: write every product "
              "and sum with __fmul_rn and __fadd_rn.")
    else:
        print("nvcc fuses none of this kernel's multiply-adds: a GPU rounds it as CPU mode did.")

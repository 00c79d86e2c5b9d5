"""Out-of-bounds kernels and where their errors surface (drills/03 and 06): the sources, and the check of a CUDA_LAUNCH_BLOCKING experiment.

A kernel launch returns before the kernel runs, so an illegal memory access is reported by whatever CUDA call
comes next: the next PyTorch operation, not the launch. With CUDA_LAUNCH_BLOCKING=1 every launch waits for its
kernel, and the error is raised at the launch itself. CPU mode always runs a launch to the end before it returns.
"""
import re

from ..device import cpu_mode
from ..harness.exercise import judges
from ..harness.rungs import VALUE
from ..processes import run_in_child
from .grayscale import CPP_SRC, CUDA_SRC

__all__ = ("overrun_source", "check_launch_blocking")

FAR = 1 << 28  # bytes past pixel i: 256 MiB, far beyond any memory PyTorch holds for a small tensor
LAUNCH = re.compile(r"\brgb_to_grayscale\s*\(")
# What CUDA calls a stray access. An H200 reports the far write as an address outside any memory space
# (measured: "operation not supported on global/shared address space"); other GPUs, and CPU mode, as illegal.
FAULTS = ("illegal memory access", "operation not supported on global/shared address space", "illegal address",
          "unspecified launch failure")


def is_fault(text):
    """True for an error message in which CUDA reports a kernel's stray memory access."""
    return any(f in (text or "") for f in FAULTS)


GUARDED = "if (i < n)\n        out[i] = "  # the L3 kernel's store, as CUDA_SRC writes it


def overrun_source(offset=0, guard=True):
    """The lessons' grayscale source writing each pixel offset bytes too far, or (guard=False) unguarded (taught in drills/03)."""
    store = ("if (i < n)\n        " if guard else "") + (f"out[i + {offset}] = " if offset else "out[i] = ")
    note = f"  // {offset:,} bytes past pixel i" if offset else "" if guard else "  // no guard: the threads past n write too"
    return CUDA_SRC.replace(GUARDED, store).replace("x[i+2*n];", f"x[i+2*n];{note}", 1)


def _launch_lines(script):
    return [k for k, line in enumerate(script.splitlines(), 1)
            if LAUNCH.search(line.split("#")[0]) and not re.search(r"\b(def|load_cuda)\b", line)]


@judges(VALUE)
def check_launch_blocking(script):
    """Runs your script in two fresh processes, CUDA_LAUNCH_BLOCKING=0 and =1, with far_src and cpp_src defined: the far overrun must raise, at the launch with 1 and at a later line with 0."""
    if not isinstance(script, str):
        raise AssertionError(f"pass the script as a string of Python, not {type(script).__name__}")
    launches = _launch_lines(script)
    if not launches:
        raise AssertionError("your script never calls module.rgb_to_grayscale(...), the launch of the far kernel. "
                             "Hint: build it with load_cuda(far_src, cpp_src, ['rgb_to_grayscale']) and call it on "
                             "an image on device().")
    runs = {b: run_in_child(script, env={"CUDA_LAUNCH_BLOCKING": b}, timeout=180, far_src=overrun_source(FAR),
                            cpp_src=CPP_SRC) for b in ("0", "1")}
    sets_it = re.search(r"CUDA_LAUNCH_BLOCKING", script)
    for b, run in runs.items():
        said = f"with CUDA_LAUNCH_BLOCKING={b}"
        if run.returncode is None:
            raise AssertionError(f"{said} your script did not finish within 180 s and was stopped.")
        if run.ok:
            hint = ("nothing after the launch waited for the GPU, so the process ended before the error was "
                    "reported: add an operation that needs the result, e.g. grey.sum().item()"
                    if b == "0" and not runs["1"].ok else
                    "it never ran the far kernel on a GPU-side image: launch module.rgb_to_grayscale on "
                    "x = torch.randint(0, 256, (3, 1, 251), dtype=torch.uint8, device=device())")
            raise AssertionError(f"{said} your script ran to the end without an error.\nHint: {hint}.")
        if not is_fault(run.error) and not is_fault(run.stderr):
            raise AssertionError(f"{said} your script failed, but not with the far kernel's memory fault (a CUDA "
                                 f"error such as 'an illegal memory access was encountered'):\n"
                                 f"  line {run.line}: {run.source_line()}\n  {run.error}\nHint: the child knows "
                                 "only far_src and cpp_src; import what else it needs (torch, course).")
    one, zero = runs["1"].line, runs["0"].line
    for b, line in (("1", one), ("0", zero)):
        if line is None:  # the error was reported, but by no line of the script: at the process's end
            raise AssertionError(f"with CUDA_LAUNCH_BLOCKING={b} the error surfaced only as the process ended, "
                                 "raised by no line of your script.\nHint: nothing after the launch waited for the GPU: add an "
                                 "operation that needs the result, e.g. grey.sum().item().")
    if one not in launches:
        raise AssertionError(f"with CUDA_LAUNCH_BLOCKING=1 the error was raised at line {one} "
                             f"({runs['1'].source_line()}), not at the launch (line {launches[0]}).\nHint: with "
                             "blocking launches the launch itself reports the error: does your script launch the "
                             "kernel more than once, or catch the error?")
    if cpu_mode():
        if zero not in launches:
            raise AssertionError(f"with CUDA_LAUNCH_BLOCKING=0 the error was raised at line {zero}, not at the launch; "
                                 "in CPU mode every launch runs to its end first, so both runs raise there.")
    elif zero in launches:
        hint = ("your script sets CUDA_LAUNCH_BLOCKING itself, so both runs block: leave it to the check"
                if sets_it else "the launch waited for its kernel although CUDA_LAUNCH_BLOCKING=0: does your "
                "script synchronize inside the launch's line?")
        raise AssertionError(f"with CUDA_LAUNCH_BLOCKING=0 the error was raised at the launch (line {zero}), as with "
                             f"1.\nHint: {hint}.")
    elif zero < one:
        raise AssertionError(f"with CUDA_LAUNCH_BLOCKING=0 the error was raised at line {zero}, before the launch.")
    print(f"CUDA_LAUNCH_BLOCKING=1: raised at line {one} ({runs['1'].source_line()}); "
          f"=0: at line {zero} ({runs['0'].source_line()}): passed")

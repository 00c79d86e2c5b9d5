"""Where kernels run: the GPU when there is one, else the CPU (CPU mode), with a plain message for what needs a GPU."""
import os


class GPUNeeded(AssertionError):
    """Raised by what can only run on an NVIDIA GPU, in CPU mode: the answer cannot be judged there, so it fails."""


class GraderFault(Exception):
    """A check that cannot run here for a reason of the grader's (no GPU where one was promised, no compute-sanitizer,
    a check server gone): never a verdict on the answer. Grading stops for that student with the reason."""


class GPULost(GraderFault):
    """GPU mode (COURSE_CPU_MODE=0, or a GPU seen when grading started) where PyTorch now sees no GPU."""


def has_gpu():
    """True when PyTorch sees a CUDA GPU."""
    import torch  # here, not above: `python -m course` imports this package and needs no torch for most commands
    return torch.cuda.is_available()


def nvidia_smi(*fields, units=True, timeout=30, gpu=None):
    """What nvidia-smi --query-gpu=FIELDS says: a list of values (strings) per GPU (gpu: only that one, an index or a
    UUID); [] without nvidia-smi, None when it fails (no NVIDIA driver loaded) or gives no answer in timeout seconds."""
    import shutil
    import subprocess
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, *([f"--id={gpu}"] if gpu is not None else []), f"--query-gpu={','.join(fields)}",
                              "--format=csv,noheader" + ("" if units else ",nounits")],
                             capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return [[v.strip() for v in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def cpu_mode():
    """True when load_cuda builds kernels to run on the CPU: COURSE_CPU_MODE=1, or no GPU unless COURSE_CPU_MODE=0."""
    flag = os.environ.get("COURSE_CPU_MODE", "").strip()
    if flag == "1":
        return True
    if flag == "0":
        return False
    return not has_gpu()


def device():
    """The device lessons put tensors on: cpu in CPU mode (or without a GPU), else cuda."""
    import torch
    return torch.device("cpu" if cpu_mode() or not has_gpu() else "cuda")


def synchronize():
    """Waits until the GPU has finished the kernels launched so far; nothing to wait for in CPU mode."""
    if not cpu_mode() and has_gpu():
        import torch
        torch.cuda.synchronize()


def cpu_banner():
    """One line saying what CPU mode means, for a notebook to print."""
    why = "COURSE_CPU_MODE=1" if has_gpu() else "no GPU here"
    return (f"CPU mode ({why}): your CUDA kernels run on the CPU. Their results are real, but timings are "
            "not GPU timings, and races and memory faults may behave differently.")


def require_gpu(what):
    """Raises, naming what needed the GPU, when there is none: GPUNeeded in CPU mode (the check fails, saying so),
    GPULost where GPU mode was asked for (COURSE_CPU_MODE=0): the grader's fault, not the answer's."""
    if not has_gpu() and not cpu_mode():
        raise GPULost(f"{what} needs an NVIDIA GPU: this process runs in GPU mode (COURSE_CPU_MODE=0) and PyTorch "
                      "sees none (torch.cuda.is_available() is False). This is the grader's set-up, not your code.")
    if not has_gpu():
        raise GPUNeeded(f"{what} needs an NVIDIA GPU, and PyTorch sees none here "
                        "(torch.cuda.is_available() is False). On a machine with a GPU this runs; "
                        "here it cannot pass, so it fails.")


def on_gpu(why):
    """True on a GPU; in CPU mode prints one line saying why the cell that asks does not run, and returns False."""
    if has_gpu() and not cpu_mode():
        return True
    where = ("CPU mode is on (COURSE_CPU_MODE=1); without it this cell runs" if has_gpu()
             else "no GPU here; on a machine with one this cell runs")
    print(f"Not run: {why.strip().rstrip('.')} ({where}).")
    return False

"""Running a student's compiled kernel in a fresh child process, so a crash or a hang fails one check only."""
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

SENTINEL = 0xAB  # what the output's memory holds before the kernel runs: 171 as uint8


class KernelFailed(AssertionError):
    """The kernel crashed, hung or raised in its child process."""


def _hint(text):
    if "illegal memory access" in text or "out of bounds" in text.lower():
        return ("a thread read or wrote outside a tensor: check the `if (i < n)` guard and the "
                "offsets n and 2*n")
    if "out of memory" in text:
        return "the function asked for more GPU memory than there is: check the sizes you allocate"
    if "must be a CUDA tensor" in text or "must be contiguous" in text:
        return "the function's input checks rejected the input the check gave it"
    if "invalid configuration" in text or "invalid argument" in text:
        return ("the launch asked for an impossible grid: threads per block must be 1 to 1024 and "
                "blocks at least 1 (an empty image launches 0 blocks: return before the launch)")
    return "read the error above: it comes from your C++ function or from your kernel"


def run_isolated(path, func, inputs, out_nbytes=None, timeout=120):
    """Calls module function func on each input moved to the GPU, in a fresh process; returns what it returned."""
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        job, result = Path(tmp) / "job.pt", Path(tmp) / "result.pt"
        torch.save({"path": str(path), "func": func, "inputs": inputs,
                    "out_nbytes": out_nbytes or [0] * len(inputs)}, job)
        proc = subprocess.Popen([sys.executable, "-m", "course.isolation", str(job), str(result)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise KernelFailed(f"your function did not finish within {timeout} s and was stopped. "
                               "Hint: a kernel whose loop never ends, or a thread waiting for "
                               "something that never happens, hangs the GPU.") from None
        if proc.returncode != 0 or not result.exists():
            if proc.returncode < 0:
                what = f"crashed with {signal.Signals(-proc.returncode).name}"
            else:
                what = f"stopped with exit code {proc.returncode}"
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise KernelFailed(f"the process running your function {what}.\n{tail}\n"
                               "Hint: a crash in the C++ wrapper often means using a pointer or "
                               "tensor that does not exist (e.g. out of range in host code).")
        outcome = torch.load(result, weights_only=False)
    if outcome["error"]:
        text = outcome["error"]
        raise KernelFailed(f"running your function raised an error:\n  {text}\nHint: {_hint(text)}.")
    return outcome["outputs"]


def _describe(y):
    if not isinstance(y, torch.Tensor):
        return {"value": y}
    return {"value": y.detach().cpu(), "device": str(y.device), "contiguous": y.is_contiguous()}


def _child(job_path, result_path):
    job = torch.load(job_path, weights_only=False)
    outcome = {"error": None, "outputs": []}
    try:
        from course.cuda import import_compiled
        fn = getattr(import_compiled(job["path"]), job["func"])
        for x, nbytes in zip(job["inputs"], job["out_nbytes"]):
            xd = x.cuda()
            if nbytes:
                # Freed to the caching allocator, this block is what the kernel's torch::empty gets.
                torch.full((nbytes,), SENTINEL, dtype=torch.uint8, device="cuda")
            y = fn(xd)
            torch.cuda.synchronize()
            d = _describe(y)
            d["input_changed"] = not torch.equal(xd.cpu(), x)
            outcome["outputs"].append(d)
    except Exception as e:
        outcome["error"] = f"{type(e).__name__}: {e}".strip()
    torch.save(outcome, result_path)


if __name__ == "__main__":
    _child(*sys.argv[1:3])

"""Running a student's compiled kernel in a fresh child process, so a crash or a hang fails one check only."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from .device import cpu_mode

SENTINEL = 0xAB  # what the output's memory holds before the kernel runs: 171 as uint8
TIMEOUT = 60  # seconds for one check's child process: the largest case takes well under 1 s to run
MEMCHECK_FAILED = 86  # compute-sanitizer's exit status when it found errors

_hung = set()  # compiled modules that hung in this process: later checks fail at once


class KernelFailed(AssertionError):
    """The kernel crashed, hung or raised in its child process."""


class OutOfBounds(KernelFailed):
    """The memory check caught a read or write outside a tensor."""


# glibc's words when a stray write has overwritten its bookkeeping between heap blocks (in CPU mode a
# kernel's writes land in the same heap; on a GPU host only the C++ wrapper's can)
HEAP_CORRUPTED = re.compile(r"free\(\): invalid|malloc\(\)|corrupted (size|double-linked)|double free or corruption|"
                            r"munmap_chunk\(\)|malloc_consolidate")


def _hint(text):
    if ("illegal memory access" in text or "out of bounds" in text.lower() or "SIGSEGV" in text
            or "SIGBUS" in text or HEAP_CORRUPTED.search(text)):
        return ("a thread read or wrote outside a tensor (or the C++ wrapper used a bad pointer): check the "
                "`if (i < n)` guard, the offsets n and 2*n, and every pointer you index")
    if "out of memory" in text or "can't allocate memory" in text or "bad_alloc" in text:
        return "the function asked for more memory than there is: check the sizes you allocate"
    if "must be a CUDA tensor" in text or "must be contiguous" in text:
        return "the function's input checks rejected the input the check gave it"
    if "invalid configuration" in text or "invalid argument" in text:
        return ("the launch asked for an impossible grid: threads per block must be 1 to 1024 and "
                "blocks at least 1 (an empty image launches 0 blocks: return before the launch)")
    return "read the error above: it comes from your C++ function or from your kernel"


def compute_sanitizer():
    """The path of CUDA's compute-sanitizer, or None when the toolkit has none."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "compute-sanitizer").exists():
            return str(Path(home) / "bin" / "compute-sanitizer")
    return None


def _tail(path, limit=4000):
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read().decode(errors="replace")


def run_isolated(path, func, inputs, out_nbytes=None, timeout=TIMEOUT, mode="run"):
    """Calls module function func on each input in a fresh process; returns what it returned, per input.

    mode "run" calls it once per input; "integrity" twice under the profiler (the ops it ran and the
    second output come back too); "memory" once, under compute-sanitizer on a GPU or with every
    tensor ending at a guard page on a CPU, and raises OutOfBounds for an access outside a tensor.
    """
    path = str(path)
    if path in _hung:
        raise KernelFailed(f"skipped: your function did not finish in an earlier check and was stopped "
                           f"then; fix the hang first (a loop that never ends?).")
    cpu = cpu_mode()
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        job, result, log = Path(tmp) / "job.pt", Path(tmp) / "result.pt", Path(tmp) / "output.txt"
        torch.save({"path": path, "func": func, "inputs": inputs, "mode": mode, "cpu": cpu,
                    "memory": cpu_memory_module() if cpu else None,
                    "out_nbytes": out_nbytes or [0] * len(inputs)}, job)
        cmd = [sys.executable, "-m", "course.isolation", str(job), str(result)]
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        if mode == "memory" and not cpu:
            sanitizer = compute_sanitizer()
            if sanitizer is None:
                raise KernelFailed("the memory check needs compute-sanitizer from the CUDA toolkit, and it "
                                   "is not on PATH or in $CUDA_HOME/bin here; this is the grader's set-up, "
                                   "not your code: tell your instructor.")
            cmd = [sanitizer, "--tool", "memcheck", "--error-exitcode", str(MEMCHECK_FAILED),
                   "--print-limit", "4", "--show-backtrace", "no"] + cmd
            env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"  # each tensor its own allocation: exact bounds
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                _hung.add(path)
                raise KernelFailed(f"your function did not finish within {timeout} s and was stopped. "
                                   "Hint: a kernel whose loop never ends, or a thread waiting for "
                                   "something that never happens, hangs the GPU.") from None
        output = _tail(log)
        code = proc.returncode
        if mode == "memory" and not cpu:
            _memory_verdict(code, output)
            if code == MEMCHECK_FAILED and result.exists():
                code = 0  # not a bad access (a refused launch, no memory): the child reports it
        if code != 0 or not result.exists():
            raise _crashed(code, output, sanitized=mode == "memory" and not cpu)
        outcome = torch.load(result, weights_only=False)
    if outcome["error"]:
        text = outcome["error"]
        if mode == "memory" and cpu and "illegal memory access" in text:
            raise OutOfBounds(text.splitlines()[-1])
        raise KernelFailed(f"running your function raised an error:\n  {text}\nHint: {_hint(text)}.")
    return outcome["outputs"]


def _crashed(returncode, output, sanitized=False):
    if returncode < 0 or (sanitized and returncode in (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE)):
        # compute-sanitizer passes its child's fatal signal on as an exit code
        what = f"crashed with {signal.Signals(abs(returncode)).name}"
    else:
        what = f"stopped with exit code {returncode}"
    tail = "\n".join(output.strip().splitlines()[-12:])
    corrupted = HEAP_CORRUPTED.search(tail)
    hint = _hint(f"{what}: {corrupted.group(0)}" if corrupted else what)
    return KernelFailed(f"the process running your function {what}.\n{tail}\nHint: {hint}.")


def _memory_verdict(returncode, output):
    """Raises OutOfBounds when compute-sanitizer caught a read or write outside a tensor."""
    errors = re.findall(r"^=+ (Invalid __\w+__ \w+ of size \d+ bytes?)", output, re.M)
    if returncode == MEMCHECK_FAILED and errors:
        found = re.search(r"ERROR SUMMARY: (\d+) error", output)
        raise OutOfBounds(f"compute-sanitizer found {found.group(1) if found else 'some'} errors; "
                          f"the first: {errors[0]}")


def _describe(y):
    if not isinstance(y, torch.Tensor):
        return {"value": y}
    return {"value": y.detach().cpu(), "device": str(y.device), "contiguous": y.is_contiguous()}


def cpu_memory_module():
    """The path of course/cpu_memory.cpp built as a module (once per machine): CPU mode's padded and guarded memory."""
    import hashlib
    import warnings

    from .cuda import build_root, quiet_cpp_extension
    source = Path(__file__).with_name("cpu_memory.cpp")
    digest = hashlib.sha256((source.read_text() + torch.__version__).encode()).hexdigest()[:12]
    name = f"course_cpu_memory_{digest}"
    build_dir = build_root() / name
    built = list(build_dir.glob(f"{name}*.so"))
    if built:
        return str(built[0])
    build_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = quiet_cpp_extension().load(name=name, sources=[str(source)], build_directory=str(build_dir),
                                            extra_cflags=["-O1"], verbose=False)
    return module.__file__


def _prefill(nbytes, dev):
    """Leaves a freed block of nbytes full of SENTINEL where the kernel's torch::empty will find it."""
    if nbytes and dev == "cuda":  # on the CPU, cpu_memory.cpp fills every new tensor
        torch.full((nbytes,), SENTINEL, dtype=torch.uint8, device=dev)


def _kernel_names(prof):
    events = []
    for e in prof.events():
        kind = "cuda" if e.device_type == torch.autograd.DeviceType.CUDA else "cpu"
        events.append((kind, e.name))
    return events


def _child(job_path, result_path):
    job = torch.load(job_path, weights_only=False)
    dev = "cpu" if job["cpu"] else "cuda"
    outcome = {"error": None, "outputs": []}
    try:
        from course.cuda import import_compiled
        fn = getattr(import_compiled(job["path"]), job["func"])
        if job["cpu"]:  # from here on, CPU tensors behave like GPU memory (course/cpu_memory.cpp)
            import_compiled(job["memory"]).install("guarded" if job["mode"] == "memory" else "padded", SENTINEL)
        for x, nbytes in zip(job["inputs"], job["out_nbytes"]):
            xd = x.clone() if job["cpu"] else x.to(dev)
            runs = 2 if job["mode"] == "integrity" else 1
            d = {}
            for run in range(runs):
                _prefill(nbytes, dev)
                if job["mode"] == "integrity" and run == 0:
                    from torch.profiler import ProfilerActivity, profile
                    acts = [ProfilerActivity.CPU] + ([] if job["cpu"] else [ProfilerActivity.CUDA])
                    with profile(activities=acts) as prof:
                        y = fn(xd)
                        if not job["cpu"]:
                            torch.cuda.synchronize()
                    d["events"] = _kernel_names(prof)
                else:
                    y = fn(xd)
                if not job["cpu"]:
                    torch.cuda.synchronize()
                if run == 0:
                    d.update(_describe(y))
                else:
                    d["again"] = _describe(y)["value"]
            d["input_changed"] = not torch.equal(xd.cpu(), x)
            outcome["outputs"].append(d)
    except Exception as e:
        outcome["error"] = f"{type(e).__name__}: {e}".strip()
    torch.save(outcome, result_path)


if __name__ == "__main__":
    _child(*sys.argv[1:3])

"""What runs in a check's child process: the student's module on each input, with what it returned and ran.

The child only runs and reports; the check that started it judges (course/harness/cuda.py, triton.py). It is forked
from a warm process (forkserver.py) or, under compute-sanitizer, started as `python -m course.harness.child`.
"""
import json
import os
import sys
import tempfile

import torch

from course import sandbox
from course.harness import trace, wire
from course.harness.tasks import named, task
from course.harness.wire import Job, Result, Run


def prefill(nbytes, byte, dev):
    """Leaves a freed block of nbytes full of byte where the kernel's torch::empty will find it."""
    if nbytes and dev == "cuda":  # on the CPU, memory.cpp fills every new tensor
        torch.full((nbytes,), byte, dtype=torch.uint8, device=dev)


def place_inputs(args, cpu, dev):
    """The arguments as the function gets them: each tensor a copy of its own on the device, anything else as it is."""
    return tuple((a.clone() if cpu else a.to(dev)) if isinstance(a, torch.Tensor) else a for a in args)


def _describe(y):
    """A Run of what the function returned: a tensor, or several (a result and a workspace) as a tuple, on the CPU."""
    many = isinstance(y, (tuple, list))
    tensors = [t for t in (y if many else [y]) if isinstance(t, torch.Tensor)]
    if not tensors:
        return Run(value=y)
    value = tuple(t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in y) if many else y.detach().cpu()
    return Run(value=value, device=",".join(sorted({str(t.device) for t in tensors})),
               contiguous=all(t.is_contiguous() for t in tensors))


def warm():
    """Imports what a spare's jobs load (the compiled-module loader, the rungs' loaders) before its job arrives."""
    import importlib
    for module in ("course.toolchain.load", "course.harness.triton"):
        importlib.import_module(module)


def _launcher_own(event):
    """Whether a profiled operation ran inside a launch's range (the launcher's own work: Triton's interpreter copies;
    the course's own markers inside it, such as CPU mode's shared-memory use, are evidence and are kept)."""
    from course.harness.wire import LAUNCHES
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(LAUNCHES):
            return True
        parent = parent.cpu_parent
    return False


def _profiled(fn, args, cpu):
    """Calls fn under PyTorch's profiler: its result and the (kind, name) of the operations and kernels it ran."""
    if cpu:  # the autograd profiler sees the same operations, without torch.profiler's import of torch._inductor (2 s)
        with torch.autograd.profiler.profile() as prof:
            y = fn(*args)
        return y, [("cpu", e.name) for e in prof.function_events
                   if not (e.name.startswith("aten::") and _launcher_own(e))]
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        y = fn(*args)
        torch.cuda.synchronize()
    events = [("cuda" if e.device_type == torch.autograd.DeviceType.CUDA else "cpu", e.name) for e in prof.events()]
    with tempfile.TemporaryDirectory() as tmp:  # the kernels' shared memory is in the trace's arguments only
        prof.export_chrome_trace(os.path.join(tmp, "trace.json"))
        trace = json.load(open(os.path.join(tmp, "trace.json")))
    for e in trace.get("traceEvents", []):
        args = e.get("args") or {}
        shared = [v for k, v in args.items() if "shared memory" in k.lower() and isinstance(v, (int, float))]
        if e.get("cat") == "kernel" and shared and max(shared) > 0:
            events.append(("shared", "shared::" + e["name"]))
    return y, events


def run(job_path, result_path):
    """The child's work: runs the job's function on each input and saves a Result."""
    key = trace.key_of(job_path)
    trace.mark("run started", key)
    job = wire.read(job_path, Job)
    dev = "cpu" if job.cpu else "cuda"
    result = Result()
    try:
        from course.toolchain.load import import_compiled
        fn = named(job.loader)(job) if job.loader else getattr(import_compiled(job.module), job.func)
        trace.mark("run loaded", key)
        memory = None
        if job.cpu:  # from here on, CPU tensors behave like GPU memory (course/harness/memory.cpp)
            memory = import_compiled(job.memory_module)
        for args, (nbytes, byte) in zip(job.inputs, job.fills):
            if memory is not None:
                memory.install("guarded_end" if job.mode == "memory" else "padded", byte)
            on_dev = place_inputs(args, job.cpu, dev)
            runs = 2 if job.mode in ("integrity", "race") or (job.cpu and job.mode == "memory") else 1
            for k in range(runs):
                if memory is not None and job.mode == "memory" and k == 1:
                    memory.install("guarded_start", byte)  # the same call with every tensor starting at a guard page
                    on_dev = place_inputs(args, True, dev)
                prefill(nbytes, byte, dev)
                if job.mode == "integrity" and k == 0:
                    y, events = _profiled(fn, on_dev, job.cpu)
                elif job.mode == "time":  # the median milliseconds of the calls, as cuda_time measures them here
                    from course.timing import cuda_time
                    y, events = cuda_time(fn, *on_dev, warmup=job.timing[0], reps=job.timing[1]), []
                else:
                    y, events = fn(*on_dev), []
                    if not job.cpu:
                        torch.cuda.synchronize()
                if k == 0:
                    run_ = _describe(y)
                    run_.events = events
                else:
                    run_.again = _describe(y).value
                del y
            run_.input_changed = any(isinstance(a, torch.Tensor) and not torch.equal(b.cpu(), a)
                                     for a, b in zip(args, on_dev))
            result.runs.append(run_)
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}".strip()
    trace.mark("run ran", key)
    wire.write(result, result_path)
    trace.mark("run saved", key)


def wait(folder, owner, kept=""):
    """A spare's life (spare.py): enters its sandbox, warms up (judging's imports, the GPU's context), then does the job
    it is handed; a kept one goes on to the next job while its process stays sound. Exits with spare.UNUSED when it
    ends without a job."""
    from course.harness.spare import UNUSED, in_sandbox, job_done, wait_for_job

    def life():
        warm()
        if torch.cuda.is_available():
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
        while True:
            job = wait_for_job(folder, int(owner))
            if job is None:
                sys.exit(UNUSED)
            if not kept:
                try:
                    task(job["task"])(*job["args"])
                finally:
                    sandbox.end_started()
                return
            if not _kept_job(job):
                return
            job_done(folder)
    in_sandbox(folder, life)


def _kept_job(job):
    """Does a kept spare's job with its output in the job's log: whether the process is still sound (it can go on)."""
    import ctypes
    import gc
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the job's prefilled block is then the one its output takes, as in a new process
    saved = [os.dup(1), os.dup(2)]
    log = os.open(job["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for fd in (1, 2):
        os.dup2(log, fd)
    try:
        task(job["task"])(*job["args"])  # an error the function raised is in its result: the process is sound
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # raises after a sticky CUDA error (a bad access): the context is lost
            torch.ones(1, device="cuda")  # raises a launch's error left pending (cudaGetLastError), which the
            torch.cuda.synchronize()      # next job's first launch would otherwise report as its own
        clean = True
    except Exception:
        clean = False
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        ctypes.CDLL(None).fflush(None)  # what the student's C++ printed
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(log)
    return clean


def build(job_path, result_path):
    """Builds a check's cuda_src with load_cuda (the module is imported here, in the child): its file, or the
    compiler's errors, as JSON. The job carries the environment of the process that asked: the same build."""
    from course.toolchain import CompileError, load_cuda
    with open(job_path) as f:
        job = json.load(f)
    os.environ.clear()
    os.environ.update(job["env"])
    try:
        result = {"path": load_cuda(job["cuda_src"], job["cpp_src"], job["funcs"]).__file__}
    except CompileError as e:
        result = {"error": str(e)}
    with open(result_path, "w") as f:
        json.dump(result, f)

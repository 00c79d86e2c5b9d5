"""What a speed test learns from running a student's function: the launches it makes, recorded in its own process.

The speed test times the student's device code, not their host code (harness/speed.py, harness/replay.py): so it
first runs the function here, in a sandboxed child with the student's code, on two sets of inputs, and records what
each call launched. A CUDA split build's stubs note each launch (course/toolchain/split.py: the kernel's entry in the
module's table, its mangled name, grid, block, shared memory and every argument's bytes, read through course_note);
a Triton kernel's launches are noted by a wrapper of its run (its name, grid, arguments and options). With them go
the addresses of the inputs, the output and the memory blocks the allocator holds, so that the judge can tell
what each pointer argument points into.

Everything reported is plain data the student's code could forge: the replay only launches what is recorded, with
its own inputs and outputs, and checks every output, so a forged record times a kernel that then gives a wrong
answer, or the one it names. This module imports nothing that judges (the import contract in pyproject.toml).
"""
import ctypes
import inspect
import os
import sys
import types

import torch

from course.harness import wire
from course.harness.child import place_inputs, prefill
from course.harness.tasks import named
from course.harness.wire import Job, Recorded

SCALARS = (bool, int, float, str, type(None))


def cuda_notes(path):
    """The course_note function of a compiled module (ctypes), or None when its build has no stubs (one unit)."""
    lib = ctypes.CDLL(path)
    if not hasattr(lib, "course_note"):
        return None
    lib.course_note.restype = ctypes.c_char_p
    lib.course_note.argtypes = [ctypes.c_int]
    return lib.course_note


def cuda_launches(text):
    """A module's note (course_note's text) as launches: {"entry", "name", "dims": grid, block, shared bytes, "args":
    [[kind, size, hex]], "stream"}; raises ValueError for a note that is not one."""
    if text == "full":
        raise ValueError("more launches than the speed test records in one call")
    launches = []
    for line in text.splitlines():
        words = line.split(" ")
        if len(words) < 11 or words[0] != "launch":
            raise ValueError(f"a launch the speed test cannot read: {line[:80]!r}")
        args = []
        for word in words[11:]:
            kind, rest = word[0], word[1:]
            size, _, data = rest.partition(":")
            if kind not in "ps" or not size.isdigit() or len(data) != 2 * int(size):
                raise ValueError(f"an argument the speed test cannot read: {word[:40]!r}")
            args.append([kind, int(size), data])
        launches.append({"entry": int(words[1]), "name": words[2], "dims": [int(w) for w in words[3:10]],
                         "stream": int(words[10]), "args": args})
    return launches


def _triton_value(value):
    if isinstance(value, torch.Tensor):
        return {"ptr": value.data_ptr(), "dtype": str(value.dtype).removeprefix("torch.")}
    if type(value) in SCALARS:
        return {"value": value}
    if type(value).__name__ == "constexpr" and type(getattr(value, "value", None)) in SCALARS:
        return {"value": value.value}
    return {"opaque": type(value).__name__}


def triton_noting(kernels, launches):
    """Wraps each kernel's run (name -> JITFunction) so that its launches are noted in launches; returns an undo."""
    undo = []
    for name, kernel in kernels.items():
        run = kernel.run
        signature = inspect.signature(kernel.fn)

        def noted(*args, grid, warmup, _run=run, _name=name, _signature=signature, **kwargs):
            _params = _signature.parameters
            if not warmup:
                bound = _signature.bind(*args, **{k: v for k, v in kwargs.items() if k in _params})
                bound.apply_defaults()
                where = grid(dict(bound.arguments)) if callable(grid) else grid
                where = [int(g) for g in (tuple(where) + (1, 1, 1))[:3]]
                launches.append({"kernel": _name, "grid": where,
                                 "args": [[k, _triton_value(v)] for k, v in bound.arguments.items()],
                                 "options": {k: _triton_value(v) for k, v in kwargs.items() if k not in _params}})
            return _run(*args, grid=grid, warmup=warmup, **kwargs)
        kernel.run = noted
        undo.append((kernel, run))

    def restore():
        for kernel, run in undo:
            kernel.run = run
    return restore


def is_kernel(value):
    """Whether a value is a @triton.jit kernel (Triton's JITFunction, or its interpreter's stand-in)."""
    return hasattr(value, "run") and isinstance(getattr(value, "fn", None), types.FunctionType) \
        and type(value).__module__.startswith("triton.")


def kernels_of(module):
    """The @triton.jit kernels a module defines: name -> kernel."""
    return {k: v for k, v in vars(module).items() if is_kernel(v)}


def module_name(path):
    """The name a Triton answer's file is imported under (harness/triton.py load), in sys.modules."""
    return os.path.basename(path)[:-3]


def module_kernels(path):
    """The @triton.jit kernels of a Triton answer's module (its file, as triton.load imported it): name -> kernel."""
    module = sys.modules.get(module_name(path))
    return kernels_of(module) if module else {}


def _span(t):
    """(address, bytes) of the memory a tensor's elements lie in."""
    if t.numel() == 0:
        return [t.data_ptr(), 0]
    extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return [t.data_ptr(), extent * t.element_size()]


def allocated(fn):
    """Calls fn with the CUDA caching allocator's history on: what it returned, and (address, bytes) of where a
    workspace's pointer may point: each allocation it made, latest first (a freed block merges with its free
    neighbours, so only the history knows its size), then every block still allocated (a tensor kept from a call
    before)."""
    history = getattr(torch.cuda.memory, "_record_memory_history", None)
    try:
        history(enabled="all", context=None, stacks="python", max_entries=100_000)
    except Exception:  # noqa: B902 (a torch without the history: every block the allocator holds, below)
        history = None
    try:
        y = fn()
        torch.cuda.synchronize()
        snapshot = torch.cuda.memory._snapshot() if history else {}
    finally:
        if history:
            history(enabled=None)
    made = [[int(t["addr"]), int(t["size"])] for traces in snapshot.get("device_traces", []) for t in traces
            if t.get("action") == "alloc"]
    segments = snapshot.get("segments") or torch.cuda.memory_snapshot()
    held = [[int(b["address"]), int(b["size"])] for segment in segments for b in segment.get("blocks", [])
            if b.get("state") == "active_allocated" or not made]
    return y, made[::-1] + held


def one_call(fn, args, note, launches, dev):
    """Calls fn on args with launches noted: what Recorded keeps of the call (the output as its place and shape)."""
    if note is not None:
        note(1)
    blocks = []
    if dev == "cuda":
        y, blocks = allocated(lambda: fn(*args))
    else:
        y = fn(*args)
    if note is not None:
        launches = cuda_launches(note(0).decode())
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"the speed test times a function that returns one tensor, and this one returned a "
                        f"{type(y).__name__}")
    call = {"launches": launches, "stream": torch.cuda.current_stream().cuda_stream if dev == "cuda" else 0,
            "inputs": [_span(a) if isinstance(a, torch.Tensor) else None for a in args],
            "output": {"span": _span(y), "shape": list(y.shape), "stride": list(y.stride()),
                       "dtype": str(y.dtype).removeprefix("torch."), "device": str(y.device)},
            "blocks": blocks}
    return call, y


def recorded(fn, module, inputs, fills, cpu, triton, calls=None):
    """Records calls of fn (loaded from module, a compiled module's or a Triton answer's file), on each input in turn
    (a fresh copy each call), calls of them in all (one on each input by default)."""
    dev = "cpu" if cpu else "cuda"
    made = []
    for k in range(calls or len(inputs)):
        args, (nbytes, byte) = inputs[k % len(inputs)], fills[k % len(inputs)]
        launches = []
        note, restore = None, None
        if triton:
            restore = triton_noting(module_kernels(module), launches)
        else:
            note = cuda_notes(module)
            if note is None:
                raise LookupError("built as one unit")
        try:
            on_dev = place_inputs(args, cpu, dev)
            prefill(nbytes, byte, dev)
            call, _ = one_call(fn, on_dev, note, launches, dev)
            del on_dev  # freed before the next call's inputs, which the allocator may place at the same address
        finally:
            if restore is not None:
                restore()
        made.append(call)
    return made


def record(job_path, result_path):
    """The child's work (task "record"): runs the job's function on each input with its launches noted; saves Recorded."""
    job = wire.read(job_path, Job)
    result = Recorded()
    try:
        from course.toolchain.load import import_compiled
        fn = named(job.loader)(job) if job.loader else getattr(import_compiled(job.module), job.func)
        if job.cpu:  # new tensors hold the fill byte, as in every CPU-mode check (memory.cpp)
            memory = import_compiled(job.memory_module)
            memory.install("padded", job.fills[0][1] if job.fills else 0)
        result.calls = recorded(fn, job.module, job.inputs, job.fills, job.cpu, bool(job.loader), job.repeat)
    except LookupError as e:
        result.unsplit = str(e)
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}".strip()
    wire.write(result, result_path)

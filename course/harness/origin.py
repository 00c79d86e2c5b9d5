"""Where a wrong element comes from, stated as facts: the thread that should have written it, whether any thread wrote
it, and what that thread's index variables held (the Python rungs, and CUDA in CPU mode, run it alone and read them).

owner(element, shape, grid, block)   the (blockIdx, threadIdx) the lessons' index gives an output element, or None
cuda_facts(job, element, case)       a CUDA check's facts: one more run of the failing input in a child (probe)
python_facts(yours, element, ran)    a Python rung's: what the runners recorded, and that one thread replayed alone
with_facts(error, lines)             the verdict with the facts put before its hint (or a hint they prove)
"""
import contextlib
import ctypes
import dataclasses
import inspect
import io
import json
import sys
import tempfile
from pathlib import Path

import torch

from . import wire
from .exercise import at_element, split_hint, unwritten, with_hint

OTHER_FILL = 0x5C  # the second run's fill byte: an element that holds each run's fill was written by no thread
ORDERS = 3         # other orders of a block's threads CPU mode's probe tries, the fill the same
SHOWN = 6          # elements a lone thread wrote, listed


def owner(element, shape, grid, block, work="element"):
    """((bx, by, bz), (tx, ty, tz)) of the thread that writes output element (a flat index) by the lessons' index
    (Exercise.work): i = blockIdx.x*blockDim.x + threadIdx.x for a 1D launch, i the element or (work "row") its row;
    row from y and column from x for a 2D launch over a 2D output. None when the launch has no such thread, or the
    work gives no element a thread of its own. Work "block_row": ((row, 0, 0), None), the block of the element's row
    (the row itself for an output of one value a row), where a 1D launch has one; which of its threads writes it is
    the kernel's own business."""
    if work == "shared":
        return None
    one_d = grid[1] == grid[2] == 1 and block[1] == block[2] == 1
    if work == "block_row":
        row = element // shape[1] if len(shape) == 2 else element
        return ((row, 0, 0), None) if one_d and len(shape) in (1, 2) and row < grid[0] else None
    if work == "row":
        if not one_d or len(shape) != 2:
            return None
        element //= shape[1]
    if one_d:
        b, t = divmod(element, block[0])
        return ((b, 0, 0), (t, 0, 0)) if b < grid[0] else None
    if len(shape) != 2 or grid[2] != 1 or block[2] != 1:
        return None
    r, c = divmod(element, shape[1])
    (bx, tx), (by, ty) = divmod(c, block[0]), divmod(r, block[1])
    return ((bx, by, 0), (tx, ty, 0)) if bx < grid[0] and by < grid[1] else None


STILL_HOLDS = "it still holds"  # how a verdict, and the Python rungs' fact, say an element kept the fill


def with_facts(error, lines):
    """error's verdict with the lines of facts after its description, before its hint; a fact the description
    already states (that the element still holds the fill) is not said twice."""
    head = split_hint(str(error))[0]
    if STILL_HOLDS in head:
        lines = [line for line in lines if not line.startswith(STILL_HOLDS)]
    if not lines:
        return error
    proven = facts_hint(error, lines)
    text = str(error) if proven is None else str(with_hint(error, proven))
    head, hint = split_hint(text)
    body = head + "".join(f"\n  {line}" for line in lines) + (f"\nHint: {hint}" if hint is not None else "")
    return at_element(body, getattr(error, "element", None), getattr(error, "case", 0))


MEMORY_BEFORE = "a thread wrote it, but what it wrote changed with what the memory held before"
READS_UNWRITTEN = ("what your kernel wrote depends on what the memory held before it ran: it reads memory nobody "
                   "wrote, most often its own output (`out[i] += ...` adds to whatever torch::empty left there) or "
                   "an element past a tensor's end. Compute the value in a local variable and store it once "
                   "(`out[i] = value;`), reading only elements of the inputs.")


ORDER_CHANGES = "in CPU mode, what it wrote changed with the order the threads of a block ran in"
ORDER_MATTERS = ("what your kernel wrote depends on the order its threads ran in: threads share data without "
                 "waiting for each other. Put __syncthreads() after the threads write shared memory and before any "
                 "thread reads what another wrote, and again before any thread overwrites what others still read "
                 "(in a reduction, after each step), where every thread of the block reaches it.")


def facts_hint(error, lines):
    """A hint the facts prove, for a verdict whose own hint could not name the cause; None when there is none."""
    if "cannot name" not in (split_hint(str(error))[1] or str(error)):
        return None
    if any(line.startswith(ORDER_CHANGES) for line in lines):
        return ORDER_MATTERS
    if any(line.startswith(MEMORY_BEFORE) for line in lines):
        return READS_UNWRITTEN
    return None


def _value(v):
    return "NaN" if isinstance(v, float) and v != v else f"{v:.7g}" if isinstance(v, float) else str(v)


def _same_value(a, b):
    return a == b or (a != a and b != b)


def _written(values):
    """The fact two runs with different fills (in CPU mode, the threads in the same order) show about one element."""
    (a, b) = values
    if a["fill"] and b["fill"]:
        return ("no thread wrote it: it held what the memory held before the call, in two runs with different "
                "contents (the fill).")
    if _same_value(a["value"], b["value"]):
        return f"a thread wrote {_value(a['value'])} there (the same in two runs with different fills)."
    return (f"{MEMORY_BEFORE} ({_value(a['value'])}, then {_value(b['value'])}): the kernel computes it from memory "
            "nobody wrote (the output before it is written, or past a tensor's end).")


def _cuda_thread(who, one_d):
    (bx, by, _), (tx, ty, _) = who
    if one_d:
        return f"thread {tx} of block {bx} (blockIdx.x = {bx}, threadIdx.x = {tx})"
    return (f"thread ({tx}, {ty}) of block ({bx}, {by}) (blockIdx.x = {bx}, blockIdx.y = {by}, threadIdx.x = {tx}, "
            f"threadIdx.y = {ty})")


def _listed(flat, count):
    shown = ", ".join(f"{i:,}" for i in flat[:SHOWN]) + (", ..." if count > SHOWN else "")
    return f"element {shown}" if count == 1 else f"{count:,} elements ({shown})"


def describe_cuda(facts, element, work="element"):
    """The lines of facts a CUDA check's probe found about output element (work: Exercise.work)."""
    lines = []
    launch, shape = facts.get("launch"), facts.get("shape") or []
    if launch and work != "shared":
        name, grid, block = launch
        one_d = grid[1] == grid[2] == 1 and block[1] == block[2] == 1
        dims = ", ".join(str(g[0]) if g[1] == g[2] == 1 else f"({g[0]}, {g[1]}, {g[2]})" for g in (grid, block))
        who = owner(element, shape, grid, block, work)
        if who is None and work == "row" and not (one_d and len(shape) == 2):
            pass  # a row-wise kernel on another launch: which thread has the row is the kernel's own business
        elif who is None and work == "block_row":
            if one_d and len(shape) in (1, 2):
                rows = shape[0]
                lines.append(f"where it comes from: your launch {name}<<<{dims}>>> starts {grid[0]:,} blocks for "
                             f"{rows:,} rows, so its row has no block of its own (a block per row needs "
                             f"{rows:,} blocks, or a loop over rows: `row += gridDim.x`).")
        elif work == "block_row":
            row = who[0][0]
            lines.append(f"where it comes from: in your launch {name}<<<{dims}>>>, block {row:,} should write it "
                         f"(a block per row: row = blockIdx.x = {row:,}; its threads share the row's work).")
        elif who is None:
            span = (f"{grid[0] * block[0]:,} threads" if one_d else
                    f"{grid[0] * block[0]:,} threads across and {grid[1] * block[1]:,} down")
            lines.append(f"where it comes from: your launch {name}<<<{dims}>>> has no thread for it ({span}).")
        else:
            index = ("i = blockIdx.x*blockDim.x + threadIdx.x" if one_d else
                     "col = blockIdx.x*blockDim.x + threadIdx.x, row = blockIdx.y*blockDim.y + threadIdx.y")
            if work == "row":
                index = f"its row, {element // shape[1]:,}: {index}"
            lines.append(f"where it comes from: in your launch {name}<<<{dims}>>>, {_cuda_thread(who, one_d)} should "
                         f"write it ({index}).")
    if facts.get("values"):
        lines.append(_written(facts["values"]))
    if facts.get("order"):
        first, then = map(_value, facts["order"])
        lines.append(f"{ORDER_CHANGES} ({first}, then {then}, the memory before the same): a thread reads what "
                     "another has not written yet, or overwrites what another has not read yet.")
    alone = facts.get("alone")
    if alone:
        if alone.get("error"):
            lines.append(f"that thread, run alone (CPU mode), failed: {alone['error']}")
        else:
            seen = ", ".join(f"{k} = {v}" for k, v in alone["vars"])
            wrote = _listed(alone["wrote"], alone["count"]) if alone["count"] else "nothing"
            had = f"had {seen} and " if seen else ""
            lines.append(f"that thread, run alone (CPU mode), {had}wrote {wrote} of the output.")
    return lines


def cuda_facts(job, element, case):
    """The facts about a CUDA check's wrong element, from one more run of that input in a child; [] if it fails."""
    from .children import TIMEOUT, in_child
    probe_job = dataclasses.replace(job, inputs=[job.inputs[case]], fills=[job.fills[case]],
                                    wheres=[job.wheres[case]], mode="origin", element=element)
    with tempfile.TemporaryDirectory(prefix="course-origin-") as tmp:
        job_path, result, log = Path(tmp) / "job.pt", Path(tmp) / "facts.json", Path(tmp) / "output.txt"
        wire.write(probe_job, job_path)
        log.touch()
        code = in_child("origin", [job_path, result], log, TIMEOUT)
        if code != 0 or not result.exists():
            return []
        try:
            facts = json.loads(wire.taken(result))
        except (wire.Unreadable, ValueError):
            return []
    try:
        return describe_cuda(facts, element, _work(job))
    except Exception:  # the facts are a help: never let reading them hide the verdict
        return []


def _work(job):
    """The Exercise.work of a job's exercise on the CUDA rung ("element" where the job names none)."""
    from .exercise import exercise_named
    return exercise_named(tuple(job.exercise)).work_on("cuda") if job.exercise else "element"


# ---- in the child: the runs that find the facts ------------------------------------------------------------------

def _own_launches(fn, args, module):
    """fn(*args) under the profiler on a GPU: its output and [name, grid, block] of the module's kernels it launched."""
    from torch.profiler import ProfilerActivity, profile
    from .integrity import base_name, module_kernels
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        y = fn(*args)
        torch.cuda.synchronize()
    own = module_kernels(module) or set()
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(str(Path(tmp) / "trace.json"))
        trace = json.loads((Path(tmp) / "trace.json").read_text())
    found = [[base_name(e["name"]), list(e["args"]["grid"]), list(e["args"]["block"])]
             for e in trace.get("traceEvents", []) if e.get("cat") == "kernel" and "grid" in (e.get("args") or {})]
    return y, [f for f in found if f[0] in own] or found


def _noted_launch(lib):
    """[name, grid, block] of the last launch the module noted (CPU mode's runtime, a GPU split build's stubs), or
    None; False when the module notes none (a GPU build of one unit: the profiler has to tell)."""
    if not hasattr(lib, "course_last_launch"):
        return False
    lib.course_last_launch.restype = ctypes.c_char_p
    dims = (ctypes.c_uint * 6)()
    name = lib.course_last_launch(dims).decode()
    return [name, list(dims[:3]), list(dims[3:])] if name else None


def _first_tensor(y):
    return next((t for t in (y if isinstance(y, (tuple, list)) else [y]) if isinstance(t, torch.Tensor)), None)


def probe(job_path, result_path):
    """The child's work for cuda_facts: the launch, the element after runs with two fills, and (CPU mode) the thread
    that should write it run alone with its index variables read. Saves them as JSON."""
    from course.toolchain.load import import_compiled
    from .child import place_inputs, prefill
    from .wire import Job
    job = wire.read(job_path, Job)
    dev = "cpu" if job.cpu else "cuda"
    facts = {}
    try:
        module = import_compiled(job.module)
        fn = getattr(module, job.func)
        memory = import_compiled(job.memory_module) if job.cpu else None
        lib = ctypes.CDLL(job.module)
        noted = _noted_launch(lib) is not False
        (args,), ((nbytes, byte),) = job.inputs, job.fills

        def call(fill, first=False):
            if memory is not None:
                memory.install("padded", fill)
            on_dev = place_inputs(args, job.cpu, dev)
            prefill(nbytes, fill, dev)
            if first and not noted:  # the profiler's first use in a process costs about 4 s on the H200
                y, launches = _own_launches(fn, on_dev, job.module)
            else:
                y = fn(*on_dev)
                if not job.cpu:
                    torch.cuda.synchronize()
                launches = [launch for launch in [_noted_launch(lib)] if launch]
            return _first_tensor(y).detach().cpu(), launches

        order = getattr(lib, "cuda_cpu_order", None)  # CPU mode: the same order of threads for both fills
        values = []
        for k, fill in enumerate((byte, OTHER_FILL)):
            if order is not None:
                order(ctypes.c_ulonglong(0))
            y, launches = call(fill, first=k == 0)
            if k == 0:
                facts["shape"], facts["launch"] = list(y.shape), (launches[-1] if launches else None)
            cell = y.reshape(-1)[job.element:job.element + 1]
            values.append({"value": cell.item(), "fill": bool((cell.view(torch.uint8) == fill).all())})
        facts["values"] = values
        if order is not None:  # the first fill again, the threads in other orders
            for seed in range(1, ORDERS + 1):
                order(ctypes.c_ulonglong(seed))
                value = call(byte)[0].reshape(-1)[job.element].item()
                if not _same_value(value, values[0]["value"]):
                    facts["order"] = [values[0]["value"], value]
                    break
        launch = facts["launch"]
        who = owner(job.element, facts["shape"], launch[1], launch[2], _work(job)) if launch else None
        if who and who[1] is not None and job.cpu and hasattr(lib, "cuda_cpu_watch"):
            lib.cuda_cpu_watch(1, *who[0], *who[1])
            try:
                y, _ = call(byte)
                wrote = (~unwritten(y)).reshape(-1).nonzero().flatten()
                lib.cuda_cpu_watched.restype = ctypes.c_char_p
                seen = lib.cuda_cpu_watched().decode()
                facts["alone"] = {"vars": [v.split("=", 1) for v in seen.split(";") if v],
                                  "wrote": wrote[:SHOWN].tolist(), "count": len(wrote)}
            except Exception as e:
                facts["alone"] = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"}
            finally:
                lib.cuda_cpu_watch(0, 0, 0, 0, 0, 0, 0)
    except Exception as e:
        facts["error"] = f"{type(e).__name__}: {e}"
    Path(result_path).write_text(json.dumps(facts))


# ---- the Python rungs: the runners' record, and one thread replayed ---------------------------------------------

class _Recording:
    """A kernel's tensor in a replay: indexing checked as the runners check it, every write noted."""

    def __init__(self, checked, writes):
        self._checked, self._writes = checked, writes

    def __getitem__(self, idx):
        return self._checked[idx]

    def __setitem__(self, idx, value):
        self._checked[idx] = value
        self._writes.append(idx)

    def __len__(self):
        return len(self._checked)

    def __getattr__(self, name):
        return getattr(self._checked, name)


def _shown(idx):
    return ", ".join(map(str, idx)) if isinstance(idx, tuple) else str(idx)


def _replay(kernel, call, args):
    """Runs the kernel for one thread on copies of args: (its int and dim3 locals at the end, [(arg, index) written],
    or an error's words)."""
    from ..ladder import CheckedTensor, dim3
    from .limit import time_limit
    writes = [[] for _ in args]
    copies = [_Recording(CheckedTensor(a.tensor.clone()), writes[k]) if isinstance(a, CheckedTensor) else a
              for k, a in enumerate(args)]
    seen = {}
    code = getattr(kernel, "__code__", None)

    def tracer(frame, event, arg):
        if frame.f_code is code and event == "return":
            seen.update({k: v for k, v in frame.f_locals.items()
                         if (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, dim3)})
        return tracer if frame.f_code is code else None

    previous = sys.gettrace()
    error = None
    try:
        with time_limit(5), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            sys.settrace(tracer)
            try:
                kernel(*call, *copies)
            finally:
                sys.settrace(previous)
    except BaseException as e:  # a thread past the end raises IndexError; the time limit its own
        error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return seen, writes, error


def python_facts(yours, element, ran, work="element"):
    """The facts about a Python rung's wrong element: the thread that should write it (by the last launch and
    Exercise.work), whether it holds the fill, and that thread replayed alone: its index variables and what it wrote.
    [] without a launch, or where the work gives no element a thread of its own."""
    from ..ladder import CheckedTensor, dim3
    launches, kernel, args = ran.get("launches"), ran.get("kernel"), ran.get("args")
    if not launches or kernel is None or args is None or not isinstance(yours, torch.Tensor) or work in ("shared", "block_row"):
        return []
    if work == "row" and (yours.dim() != 2 or launches[-1][0] not in ("run_kernel", "blk_kernel")):
        return []
    launch = launches[-1]
    kind = launch[0]
    outputs = [k for k, a in enumerate(args) if isinstance(a, CheckedTensor)
               and a.tensor.untyped_storage().data_ptr() == yours.untyped_storage().data_ptr()]
    k = (element + yours.storage_offset() - args[outputs[0]].tensor.storage_offset()) if outputs else element
    if work == "row":
        k //= yours.shape[1]
    if kind == "run_kernel":
        times = launch[1]
        if isinstance(times, tuple):
            i, j = divmod(k, times[1])
            call = (i, j) if i < times[0] else None
            who = f"run_kernel's call with i = {i}, j = {j}" if call else None
        else:
            call = (k,) if k < times else None
            who = f"run_kernel's call with i = {k}" if call else None
        span = f"run_kernel called it for {times if isinstance(times, int) else 'x'.join(map(str, times))} threads"
    elif kind == "blk_kernel":
        blocks, threads = launch[1], launch[2]
        b, t = divmod(k, threads)
        call = (b, t, threads) if b < blocks else None
        who = f"thread {t} of block {b} (blockidx = {b}, threadidx = {t})" if call else None
        span = f"blk_kernel ran {blocks} blocks of {threads} threads"
    elif kind in ("blk_kernel2d", "blk_kernel2d_shar") and yours.dim() == 2:
        blocks, threads = launch[1], launch[2]
        who3 = owner(element, tuple(yours.shape), tuple(blocks), tuple(threads))
        call = (dim3(*who3[0]), dim3(*who3[1]), threads) if who3 and kind == "blk_kernel2d" else None
        who = (f"thread ({who3[1][0]}, {who3[1][1]}) of block ({who3[0][0]}, {who3[0][1]}) (blockidx.x = "
               f"{who3[0][0]}, blockidx.y = {who3[0][1]}, threadidx.x = {who3[1][0]}, threadidx.y = {who3[1][1]})"
               if who3 else None)
        span = (f"{kind} ran {blocks.x * threads.x} threads across and {blocks.y * threads.y} down")
    else:
        return []
    its = f"its row, row {k:,}" if work == "row" else "it"
    lines = [f"where it comes from: {who} should write {its}." if who else
             f"where it comes from: no thread has {its} ({span})."]
    never = unwritten(yours)
    if never is not None:
        flat = yours.reshape(-1)
        held = _value(flat[element].item())
        unless = "" if yours.dtype.is_floating_point else f" (unless a thread wrote {held} itself)"
        lines.append(f"{STILL_HOLDS} {held}, what the memory held before the call: no thread wrote it{unless}."
                     if bool(never.reshape(-1)[element]) else f"a thread wrote {held} there.")
    if call is None:
        return lines
    seen, writes, error = _replay(kernel, call, args)
    try:
        names = list(inspect.signature(kernel).parameters)[len(call):]
    except (TypeError, ValueError):
        names = []
    names += [f"argument {n + 1}" for n in range(len(names), len(args))]
    wrote = [f"{names[a]}[{_shown(idx)}]" for a, w in enumerate(writes) for idx in w]
    values = ", ".join(f"{name} = {v}" for name, v in list(seen.items())[:8])
    did = (f"wrote {', '.join(wrote[:SHOWN])}{', ...' if len(wrote) > SHOWN else ''}" if wrote else "wrote nothing")
    if error:
        did += f", and raised {error}"
    lines.append(f"that thread, run alone: {values + '; it ' if values else 'it '}{did}.")
    return lines

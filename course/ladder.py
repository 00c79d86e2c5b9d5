"""The Python rungs of the ladder: runners that call a kernel once per thread, as CUDA would."""
import contextlib
import itertools
from pathlib import Path
import sys
import threading
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

MAX_THREADS_PER_BLOCK = 1024
FEW = 16  # elements: one thread's arithmetic is on single values (a pixel's three channels); more is vectorised work
PROBED_LAUNCHES = 4  # the launches of one call whose picked threads run alone first (the first ones)


def new_record(reversed=False, alone=None):
    """An empty record of what the runners do in one call; reversed: blk_kernel2d_shar's blocks run threads last to first;
    alone: the judge's picks (fractions in [0, 1)) of the threads each launch first runs alone (its "contract")."""
    return {"threads": 0, "returned": 0, "returned_by": None, "launches": [], "kernel": None, "args": None,
            "writes": 0, "syncs": 0, "reversed": reversed, "alone": alone, "contract": []}


_record = new_record()  # where the runners write: the record of the call being recorded, else one nobody reads


@contextlib.contextmanager
def recording(reversed=False, alone=None):
    """A fresh record that the runners write while the block runs: what a check's call did (harness/python.py)."""
    global _record
    outer, _record = _record, new_record(reversed, alone)
    try:
        yield _record
    finally:
        _record = outer


def record():
    """The record the runners write now."""
    return _record


class dim3(NamedTuple):
    """CUDA's dim3: x, y and z extents, y and z defaulting to 1 (taught in grayscale/L2)."""
    x: int
    y: int = 1
    z: int = 1


class CheckedTensor:
    """A tensor as a kernel sees it: an index outside the tensor raises instead of wrapping."""
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor

    def _check(self, idx):
        parts = idx if isinstance(idx, tuple) else (idx,)
        for dim, k in enumerate(parts):
            if isinstance(k, torch.Tensor) and k.dim() == 0 and not k.is_floating_point():
                k = int(k)
            if not isinstance(k, int) or dim >= self.tensor.dim():
                continue  # slices, masks and too many indices: torch's own checks apply
            size = self.tensor.shape[dim]
            if not 0 <= k < size:
                hint = (" Python would wrap a negative index to the end of the tensor; CUDA has "
                        "no such wrap-around and would touch memory outside it." if k < 0 else "")
                e = IndexError(f"index {k} is out of range for dimension {dim} of a tensor "
                               f"with shape {tuple(self.tensor.shape)} (valid: 0 to {size - 1}).{hint}")
                if k >= 0:
                    e.past_end = (self, k, size)  # _call adds the hint that the kernel's source and values support
                raise e

    def __getitem__(self, idx):
        self._check(idx)
        return self.tensor[idx]

    def __setitem__(self, idx, value):
        self._check(idx)
        self.tensor[idx] = value

    def __len__(self):
        return len(self.tensor)

    def __getattr__(self, name):
        return getattr(self.tensor, name)

    def __repr__(self):
        return f"CheckedTensor({self.tensor!r})"


def _checked(args):
    return tuple(CheckedTensor(a) if isinstance(a, torch.Tensor) else a for a in args)


def _count(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number (an int), not {type(value).__name__} {value!r}; "
                        f"math.ceil or cdiv turn a division into one")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


def _as_dim3(name, value):
    if isinstance(value, int) and not isinstance(value, bool):
        value = dim3(value)
    if not isinstance(value, tuple) or not 1 <= len(value) <= 3:
        raise TypeError(f"{name} must be a dim3 (or an int), not {value!r}")
    value = dim3(*value)
    for axis, extent in zip("xyz", value):
        _count(f"{name}.{axis}", extent)
    return value


def _launched(launch, kernel, args):
    """Notes a launch, (runner, its grid..., threads in all), its kernel and arguments, for the hints; only the last few
    launches are kept."""
    _record["kernel"], _record["args"] = kernel, args
    _record["launches"].append(launch)
    del _record["launches"][:-8]


def _past_end_hint(e, kernel):
    """The hint for an index past a tensor's end, read from the kernel's source and values (harness/evidence.py)."""
    from .harness.evidence import index_hint
    tensor, k, size = e.past_end
    launch = _record["launches"][-1] if _record["launches"] else None
    n_index = 2 if launch and (launch[0].startswith("blk_kernel") or isinstance(launch[1], tuple)) else 1
    try:
        return " Hint: " + index_hint(kernel, e.__traceback__, tensor, k, size, launch, n_index)
    except Exception:  # the hint is a help: never let reading the evidence hide the error itself
        return ""


def _call(f, where, *args, kernel=None):
    try:
        if f(*args) is not None:
            _record["returned"] += 1
            _record["returned_by"] = getattr(f, "__name__", None)
    except Exception as e:
        hint = _past_end_hint(e, kernel or f) if getattr(e, "past_end", None) else ""
        msg = f"{e}{hint}\n  (raised in {where})"
        try:
            new = type(e)(msg)
        except Exception:  # an exception type that takes other arguments: keep it, add a note
            new = None
        if new is None:
            e.add_note(f"raised in {where}")
            raise
        raise new.with_traceback(e.__traceback__) from None


# ---- the one-thread contract: picked threads run alone on fresh copies, before the launch itself ------------------

_TOPICS = str(Path(__file__).resolve().parent / "topics")  # where the course's references live


_PICKS = {"index", "index_select", "gather", "take", "index_put", "index_put_", "_index_put_impl_"}  # by index:
# what they compute is what they read or store, not the tensor they pick it from or into


class _Computes(TorchDispatchMode):
    """Notes each PyTorch operation that computes on more than FEW elements (a view computes nothing)."""

    @classmethod
    def _should_skip_dynamo(cls):  # nothing here is compiled: wrapping it for torch.compile would import dynamo (3-6 s)
        return False

    def __init__(self, ops):
        super().__init__()
        self.ops = ops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **kwargs) if kwargs else func(*args)
        if not func.is_view:  # runs for every scalar operation of every thread run alone: kept short
            name = func.overloadpacket.__name__
            n = _most(args[1:] if name in _PICKS else args)
            if name not in _PICKS:
                n = max(n, _most((out,)))
            if kwargs:
                n = max(n, _most(kwargs.values()))
            if n > FEW:
                self.ops.append([name, n])
        return out


def _most(items):
    """The most elements of a tensor among items (and the lists and tuples in them)."""
    n = 0
    for t in items:
        if isinstance(t, torch.Tensor):
            n = max(n, t.numel())
        elif isinstance(t, (list, tuple)):
            n = max(n, _most(t))
    return n


class _Watch:
    """What a unit run alone computed: the operations on more than FEW elements, the course's references it called."""

    def __init__(self):
        self.ops, self.refs = [], []

    @contextlib.contextmanager
    def inside(self):
        """Watches the thread that enters it (PyTorch's modes and Python's profiler are per thread)."""
        refs = self.refs

        def called(frame, event, arg):  # a trace function sees Python calls only (a profiler, every C call too)
            if frame.f_code.co_filename.startswith(_TOPICS):
                refs.append(frame.f_code.co_name)

        previous = sys.gettrace()
        sys.settrace(called)
        try:
            with _Computes(self.ops):
                yield
        finally:
            sys.settrace(previous)


class _Watched(CheckedTensor):
    """A fresh copy of a kernel's tensor for a unit run alone: each store through it noted, with the thread's number."""
    __slots__ = ("stores", "k", "who")

    def __init__(self, tensor, stores, k):
        super().__init__(tensor)
        self.stores, self.k, self.who = stores, k, lambda: 0

    def __setitem__(self, idx, value):
        super().__setitem__(idx, value)
        self.stores.append((self.k, self.who(), idx))


def _changed(before, after):
    """Where two tensors of one shape differ bit for bit, as flat indices."""
    if before.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    a = before.detach().contiguous().reshape(-1).view(torch.uint8).view(before.numel(), before.element_size())
    b = after.detach().contiguous().reshape(-1).view(torch.uint8).view(after.numel(), after.element_size())
    return (a != b).any(dim=1).nonzero().flatten()


def _flat(tensor, idx):
    """The flat indices an index into tensor selects; empty when it selects none that can be named."""
    try:
        return torch.arange(tensor.numel()).view(tensor.shape)[idx].reshape(-1)
    except Exception:  # an index torch refuses stored nothing
        return torch.zeros(0, dtype=torch.long)


def _run_alone(who, at, run, args, before, outputs):
    """Runs one unit alone on fresh copies of args as they were before the launch, the launch's outputs filled with
    the fill pattern: what it wrote (flat indices of each tensor), the most elements one of its threads stored, what it
    computed; all as plain data."""
    from .harness.exercise import fill_byte
    stores, watch, starts, copies = [], _Watch(), [], []
    for k, (a, b) in enumerate(zip(args, before)):
        if b is None:
            starts.append(None)
            copies.append(a)
            continue
        start = b.clone()
        if k in outputs and start.dtype != torch.bool and start.is_contiguous():
            start.view(-1).view(torch.uint8).fill_(fill_byte(start.dtype))
        starts.append(start)
        copies.append(_Watched(start.clone(), stores, k))
    kept = {k: _record[k] for k in ("syncs", "threads", "returned", "returned_by")}
    error = None
    try:
        run(copies, watch)
    except Exception as e:  # an error the launch did not raise (it ran first): noted, never the verdict
        text = str(e).strip()
        error = f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"
    finally:
        _record.update(kept)
    wrote, most = [], [0, 0]
    for k, (start, c) in enumerate(zip(starts, copies)):
        if start is None:
            continue
        by_thread = {}
        for arg, t, idx in stores:
            if arg == k:
                by_thread.setdefault(t, []).append(_flat(start, idx))
        for t, parts in by_thread.items():
            count = len(torch.cat(parts).unique())
            if count > most[0]:
                most = [count, t]
        flat = torch.cat([_changed(start, c.tensor), *(p for parts in by_thread.values() for p in parts)]).unique()
        if len(flat):
            wrote.append({"arg": k, "numel": start.numel(), "flat": flat})
    return {"who": who, "at": at, "wrote": wrote, "most": most, "ops": watch.ops[:8], "refs": sorted(set(watch.refs)),
            "error": error}


def _one_thread(f, call):
    """A unit of one thread: calls f on its index values and the copies, watched."""
    def run(copies, watch):
        with watch.inside():
            f(*call, *copies)
    return run


@contextlib.contextmanager
def _contract(kind, geometry, total, unit, f, args):
    """Around a launch of total units: notes which tensors the launch wrote, then runs the judge's picks among its
    units alone (unit(u) gives a unit's (who, where it is, how to run it)) on fresh copies of the tensors as they were
    before it; the record's contract gets it all as plain data (harness/contract.py judges it)."""
    picks = _record["alone"]
    if picks is None or total == 0 or len(_record["contract"]) >= PROBED_LAUNCHES:
        yield
        return
    before = [a.tensor.clone() if isinstance(a, CheckedTensor) else None for a in args]
    yield
    outputs = [k for k, (a, b) in enumerate(zip(args, before)) if b is not None and len(_changed(b, a.tensor))]
    chosen = sorted({0, total - 1, *(min(int(p * total), total - 1) for p in picks)})
    _record["contract"].append({"runner": kind, **geometry, "outputs": [[k, args[k].tensor.numel()] for k in outputs],
                                "units": [_run_alone(*unit(u), args, before, outputs) for u in chosen]})

def run_kernel(f, times, *args):
    """Calls f(i, *args) for i in range(times), or f(i, j, *args) for every (i, j) when times is (rows, cols) (taught in grayscale/L1, matmul/L1)."""
    args = _checked(args)
    if isinstance(times, tuple):
        if len(times) != 2:
            raise TypeError(f"times must be an int or a pair (rows, cols), not {times!r}")
        rows, cols = _count("times[0]", times[0]), _count("times[1]", times[1])
        _launched(("run_kernel", times, rows * cols), f, args)

        def unit(u):
            i, j = divmod(u, cols)
            return f"thread i={i}, j={j}", [i, j], _one_thread(f, (i, j))
        with _contract("run_kernel", {"times": [rows, cols]}, rows * cols, unit, f, args):
            for i, j in itertools.product(range(rows), range(cols)):
                _record["threads"] += 1
                _call(f, f"thread i={i}, j={j}", i, j, *args)
        return
    _count("times", times)
    _launched(("run_kernel", times, times), f, args)
    with _contract("run_kernel", {"times": times}, times, lambda u: (f"thread i={u}", u, _one_thread(f, (u,))), f, args):
        for i in range(times):
            _record["threads"] += 1
            _call(f, f"thread i={i}", i, *args)


def _check_threads(threads):
    n = threads.x * threads.y * threads.z
    if n > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"{n} threads per block: CUDA allows at most {MAX_THREADS_PER_BLOCK}")
    if n == 0:
        raise ValueError("a block needs at least one thread")


def blk_kernel(f, blocks, threads, *args):
    """Calls f(blockidx, threadidx, blockdim, *args) for every block and thread, like a CUDA launch (taught in grayscale/L2)."""
    _count("blocks", blocks)
    _check_threads(dim3(_count("threads", threads)))
    args = _checked(args)
    _launched(("blk_kernel", blocks, threads, blocks * threads), f, args)

    def unit(u):
        b, t = divmod(u, threads)
        return f"thread {t} of block {b}", u, _one_thread(f, (b, t, threads))
    with _contract("blk_kernel", {"blocks": blocks, "threads": threads}, blocks * threads, unit, f, args):
        for i in range(blocks):
            for j in range(threads):
                _record["threads"] += 1
                _call(f, f"block {i}, thread {j}", i, j, threads, *args)


def blk_kernel2d(f, blocks, threads, *args):
    """Like blk_kernel with dim3 blocks and threads: calls f(blockidx, threadidx, blockdim, *args) (taught in grayscale/L2)."""
    blocks, threads = _as_dim3("blocks", blocks), _as_dim3("threads", threads)
    _check_threads(threads)
    args = _checked(args)
    _launched(("blk_kernel2d", blocks, threads,
               blocks.x * blocks.y * blocks.z * threads.x * threads.y * threads.z), f, args)
    every = list(itertools.product(itertools.product(range(blocks.z), range(blocks.y), range(blocks.x)),
                                   itertools.product(range(threads.z), range(threads.y), range(threads.x))))

    def unit(u):
        (bz, by, bx), (tz, ty, tx) = every[u]
        return (f"thread (x={tx}, y={ty}) of block (x={bx}, y={by})", [[bx, by, bz], [tx, ty, tz]],
                _one_thread(f, (dim3(bx, by, bz), dim3(tx, ty, tz), threads)))
    with _contract("blk_kernel2d", {"blocks": list(blocks), "threads": list(threads)}, len(every), unit, f, args):
        for (bz, by, bx), (tz, ty, tx) in every:
            _record["threads"] += 1
            _call(f, f"block (x={bx}, y={by}, z={bz}), thread (x={tx}, y={ty}, z={tz})",
                  dim3(bx, by, bz), dim3(tx, ty, tz), threads, *args)


class _Stop(BaseException):
    """Unwinds the threads of a block that another thread's error has stopped."""


class _Block:
    """The threads of one block, run one at a time in a fixed order, each until it waits at syncthreads() or ends.

    As in CPU mode's CUDA, nothing runs between two barriers but one thread at a time: a kernel that reads
    what another thread has yet to write, or overwrites what another still needs, gives a wrong answer
    every time, not once in a while.
    """

    def __init__(self, f, blockidx, threads, shared, args, watch=None):
        self.f, self.blockidx, self.threads, self.shared, self.args = f, blockidx, threads, shared, args
        self.watch = watch  # a block run alone for the contract: each thread watched (_Watch)
        self.n = threads.x * threads.y * threads.z
        self.go = [threading.Semaphore(0) for _ in range(self.n)]  # a thread's turn to run
        self.back = threading.Semaphore(0)                          # the running thread paused or ended
        self.local = threading.local()
        self.paused, self.stopped, self.error = None, False, None

    def syncthreads(self):
        """__syncthreads(): waits until every thread of the block has arrived (or ended)."""
        t = self.local.t
        _record["syncs"] += 1
        self.paused = "barrier"
        self.back.release()
        self.go[t].acquire()
        if self.stopped:
            raise _Stop()

    def _thread(self, t, threadidx):
        self.local.t = t
        self.go[t].acquire()
        try:
            if not self.stopped:
                with self.watch.inside() if self.watch else contextlib.nullcontext():
                    self.f(self.blockidx, threadidx, self.threads, self.shared, self.syncthreads, *self.args)
        except _Stop:
            return
        except Exception as e:
            self.error = (threadidx, e)
        self.paused = "done"
        self.back.release()

    def run(self):
        idx = [dim3(tx, ty, tz) for tz, ty, tx in itertools.product(
            range(self.threads.z), range(self.threads.y), range(self.threads.x))]
        workers = [threading.Thread(target=self._thread, args=(t, i), daemon=True) for t, i in enumerate(idx)]
        for w in workers:
            w.start()
        ready = list(range(self.n))[::-1] if _record["reversed"] else list(range(self.n))
        try:
            while ready and self.error is None:
                waiting = []
                for t in ready:
                    self.go[t].release()
                    self.back.acquire()
                    if self.paused == "barrier":
                        waiting.append(t)
                    if self.error is not None:
                        break
                ready = waiting  # every thread is waiting or done: the barrier opens
        finally:
            self.stopped = True
            for g in self.go:
                g.release()
            for w in workers:
                w.join()
        if self.error is not None:
            t, e = self.error
            _call(_reraise, f"block (x={self.blockidx.x}, y={self.blockidx.y}, z={self.blockidx.z}), "
                            f"thread (x={t.x}, y={t.y}, z={t.z})", e, kernel=self.f)


def _reraise(e):
    raise e


def blk_kernel2d_shar(f, blocks, threads, sh_sz, *args):
    """Like blk_kernel2d with shared memory and a barrier: calls f(blockidx, threadidx, blockdim, shared, syncthreads, *args) (taught in matmul/tiling)."""
    blocks, threads = _as_dim3("blocks", blocks), _as_dim3("threads", threads)
    _check_threads(threads)
    _count("sh_sz", sh_sz)
    args = _checked(args)
    _launched(("blk_kernel2d_shar", blocks, threads,
                            blocks.x * blocks.y * blocks.z * threads.x * threads.y * threads.z), f, args)
    every = list(itertools.product(range(blocks.z), range(blocks.y), range(blocks.x)))

    def unit(u):  # threads of a block share its memory and barrier: a block runs alone, its threads' stores told apart
        bz, by, bx = every[u]

        def run(copies, watch):
            block = _Block(f, dim3(bx, by, bz), threads, CheckedTensor(torch.full((sh_sz,), float("nan"))), copies,
                           watch)
            for c in copies:
                if isinstance(c, _Watched):
                    c.who = lambda: getattr(block.local, "t", 0)
            block.run()
        return f"block (x={bx}, y={by})", [bx, by, bz], run
    with _contract("blk_kernel2d_shar", {"blocks": list(blocks), "threads": list(threads)}, len(every), unit, f, args):
        for bz, by, bx in every:
            # Each block's own shared memory, holding NaN until written: reading a slot too early shows.
            shared = CheckedTensor(torch.full((sh_sz,), float("nan")))
            _Block(f, dim3(bx, by, bz), threads, shared, args).run()
            _record["writes"] += shared.tensor._version  # every write, through views too, counts

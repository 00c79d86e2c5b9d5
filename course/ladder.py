"""The Python rungs of the ladder: runners that call a kernel once per thread, as CUDA would."""
import contextlib
import itertools
import threading
from typing import NamedTuple

import torch

MAX_THREADS_PER_BLOCK = 1024


def new_record(reversed=False):
    """An empty record of what the runners do in one call; reversed: blk_kernel2d_shar's blocks run threads last to first."""
    return {"threads": 0, "returned": 0, "returned_by": None, "launches": [], "kernel": None, "args": None,
            "writes": 0, "syncs": 0, "reversed": reversed}


_record = new_record()  # where the runners write: the record of the call being recorded, else one nobody reads


@contextlib.contextmanager
def recording(reversed=False):
    """A fresh record that the runners write while the block runs: what a check's call did (harness/python.py)."""
    global _record
    outer, _record = _record, new_record(reversed)
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


def run_kernel(f, times, *args):
    """Calls f(i, *args) for i in range(times), or f(i, j, *args) for every (i, j) when times is (rows, cols) (taught in grayscale/L1, matmul/L1)."""
    args = _checked(args)
    if isinstance(times, tuple):
        if len(times) != 2:
            raise TypeError(f"times must be an int or a pair (rows, cols), not {times!r}")
        rows, cols = _count("times[0]", times[0]), _count("times[1]", times[1])
        _launched(("run_kernel", times, rows * cols), f, args)
        for i, j in itertools.product(range(rows), range(cols)):
            _record["threads"] += 1
            _call(f, f"thread i={i}, j={j}", i, j, *args)
        return
    _count("times", times)
    _launched(("run_kernel", times, times), f, args)
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
    for bz, by, bx in itertools.product(range(blocks.z), range(blocks.y), range(blocks.x)):
        for tz, ty, tx in itertools.product(range(threads.z), range(threads.y), range(threads.x)):
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

    def __init__(self, f, blockidx, threads, shared, args):
        self.f, self.blockidx, self.threads, self.shared, self.args = f, blockidx, threads, shared, args
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
    for bz, by, bx in itertools.product(range(blocks.z), range(blocks.y), range(blocks.x)):
        # Each block's own shared memory, holding NaN until written: reading a slot too early shows.
        shared = CheckedTensor(torch.full((sh_sz,), float("nan")))
        _Block(f, dim3(bx, by, bz), threads, shared, args).run()
        _record["writes"] += shared.tensor._version  # every write, through views too, counts

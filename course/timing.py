"""Timing kernels honestly: CUDA events after warm-up, the median of repeats, a plot (taught in matmul/L3), and stand-ins that check a timer (drills/04)."""
import statistics
import time

import torch

from .device import cpu_mode, has_gpu


def cuda_time(fn, *args, warmup=3, reps=20):
    """Median milliseconds of fn(*args): CUDA events around each call on a GPU, a wall clock in CPU mode."""
    if not isinstance(reps, int) or reps < 1 or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0 and reps an int >= 1, got {warmup!r} and {reps!r}")
    if hasattr(fn, "time_in_child"):  # isolation.IsolatedFunction: a student's kernel in a process of its own, timed there
        return fn.time_in_child(*args, warmup=warmup, reps=reps)
    gpu = has_gpu() and not cpu_mode()
    for _ in range(warmup):  # the first calls pay for loading the module, the CUDA context, caches
        fn(*args)
    if gpu:
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            end.synchronize()  # a launch returns before its kernel ends: wait for the end event
            times.append(start.elapsed_time(end))
        else:
            t = time.perf_counter()
            fn(*args)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def plot_times(times, title="", unit="ms", log=False):
    """A bar chart of {name: time}, each bar labelled with its value (taught in matmul/L3)."""
    import matplotlib.pyplot as plt
    if not times:
        raise ValueError("nothing to plot: pass {name: time}")
    names, values = list(times), [float(v) for v in times.values()]
    fig, ax = plt.subplots(figsize=(1.4 + 1.3 * len(names), 3))
    bars = ax.bar(names, values, color="tab:blue")
    ax.bar_label(bars, labels=[f"{v:.3g} {unit}" for v in values], fontsize=8)
    ax.set_ylabel(unit)
    if log:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.margins(y=0.15)
    plt.tight_layout()
    plt.show()


# ---- work for checking a timer (drills/04): a launch returns before its work is done ----------------------------

_queued = [0.0]  # CPU mode: milliseconds of simulated GPU work that the next synchronize() must wait for
_cycles_per_ms = []


def _gpu_cycles(ms):
    """GPU clock cycles that torch.cuda._sleep spins for ms milliseconds on this GPU (measured once with events)."""
    if not _cycles_per_ms:
        probe = 10_000_000
        torch.cuda._sleep(probe)  # warm up
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        end.synchronize()
        _cycles_per_ms.append(probe / start.elapsed_time(end))
    return int(ms * _cycles_per_ms[0])


def _synchronize_and_finish_queued():
    """synchronize(), which in CPU mode also waits for the simulated work AsyncWork queued (installed by AsyncWork)."""
    wait, _queued[0] = _queued[0], 0.0
    if wait:
        time.sleep(wait / 1e3)
    _synchronize_and_finish_queued.__wrapped__()


def _queue_cpu_work(ms, caller):
    """Queues ms of simulated GPU work, and makes the synchronize() the caller's code calls wait for it."""
    import sys
    device = sys.modules[__name__.rsplit(".", 1)[0] + ".device"]  # the module (course.device is also a function's name)
    original = getattr(_synchronize_and_finish_queued, "__wrapped__", None)
    if original is None:
        original = _synchronize_and_finish_queued.__wrapped__ = device.synchronize
        _synchronize_and_finish_queued.__doc__ = original.__doc__
    course = sys.modules[__name__.rsplit(".", 1)[0]]
    spaces = [vars(device), vars(course)]
    frame = caller
    while frame is not None:  # the timer's globals (the notebook's), and those of whatever called it
        spaces.append(frame.f_globals)
        frame = frame.f_back
    for space in spaces:
        for name, value in list(space.items()):
            if value is original:
                space[name] = _synchronize_and_finish_queued
    _queued[0] += ms


# What a call costs the host before it returns. A real launch costs 5-20 µs; this one is slower so that a clock
# around the launch alone (about 0.1 ms) never reads like the work's 10-50 ms reported in seconds (0.01-0.05).
LAUNCH_MS = 0.1


class AsyncWork:
    """A stand-in for a kernel launch, to check a timer with: each call returns at once and its ms of work is done by the next synchronize().

    On a GPU the work is torch.cuda._sleep, which keeps the GPU busy. In CPU mode nothing runs asynchronously, so
    the work is simulated: the call queues it, and synchronize() (from course) waits it out.
    """

    def __init__(self, ms):
        self.ms, self.calls = float(ms), 0

    def __call__(self, *args):
        import sys
        self.calls += 1
        start = time.perf_counter()
        while time.perf_counter() - start < LAUNCH_MS / 1e3:
            pass
        if has_gpu() and not cpu_mode():
            torch.cuda._sleep(_gpu_cycles(self.ms))
        else:
            _queue_cpu_work(self.ms, sys._getframe(1))

    def pending(self):
        """Whether work queued by a call is still unfinished (no synchronize() since)."""
        if has_gpu() and not cpu_mode():
            return not torch.cuda.current_stream().query()
        return _queued[0] > 0

    def __repr__(self):
        return f"AsyncWork({self.ms:g} ms a call, finished by synchronize())"


class SlowFirstCall:
    """A stand-in for a kernel whose first call is slow (loading code, filling caches): first_ms, then ms a call, each waited for."""

    def __init__(self, first_ms, ms):
        self.first_ms, self.ms, self.calls = float(first_ms), float(ms), 0

    def __call__(self, *args):
        self.calls += 1
        time.sleep((self.first_ms if self.calls == 1 else self.ms) / 1e3)

    def __repr__(self):
        return f"SlowFirstCall({self.first_ms:g} ms, then {self.ms:g} ms a call)"

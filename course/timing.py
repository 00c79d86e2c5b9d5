"""Timing kernels honestly: CUDA events after warm-up, the median of repeats, and a plot (taught in matmul/L3)."""
import statistics
import time

import torch

from .device import cpu_mode, has_gpu


def cuda_time(fn, *args, warmup=3, reps=20):
    """Median milliseconds of fn(*args): CUDA events around each call on a GPU, a wall clock in CPU mode."""
    if not isinstance(reps, int) or reps < 1 or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0 and reps an int >= 1, got {warmup!r} and {reps!r}")
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

"""The speed tests' bars: the course's kernels against themselves, and the lesson's kernels ranked as students.

1. Each speed test an exercise declares (Exercise.speed: grayscale's CUDA rung, the tiled matmul, and any added
   later, like a Triton rung's) times the course's own kernel as if a student had handed it in, --runs times (10):
   it must get full marks every time, and its median's spread over the runs ((max - min) / median) stay under 3%;
   the same kernel is also timed called in-process (its host code and all, as the speed test timed before the
   replay, harness/replay.py), and the replayed median must stay within 3% of it (the median over the runs).
2. The tiled matmul's speed test times the lesson's four matmul kernels as students (benchmarks/matmul.py reads
   them from the notebooks), --rankings times (3): 8x8 a thread, 2x2 a thread, tiled 16, naive, fastest first,
   every time. The naive kernel would not pass the tiled exercise's integrity check (no shared memory), so the
   kernels are timed as the speed test times them, without the checks a student's kernel passes first.

Run it on the GPU host: python3 benchmarks/speed.py [--json FILE] [--runs 10] [--rankings 3]. It prints each
figure and exits 1 when a bar is missed. (COURSE_SPEED_CPU=1 runs it in CPU mode with a wall clock: a smoke test
of the code, its figures meaningless.)
"""
import argparse
import importlib
import json
import os
import pkgutil
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.matmul import KERNELS, sources
from course.device import cpu_mode
from course.harness import speed
from course.harness.exercise import Exercise
from course.harness.rungs import RUNGS

SPREAD = 0.03  # bar: a kernel's median over repeated speed tests spreads less than this
REPLAYED = 0.03  # bar: the replayed kernel's median within this of the same kernel called in-process (host code too)
RANKED = ("8x8 a thread (register tiling)", "tiled, 2x2 a thread", "tiled 16 (static)", "naive (L3)")  # fastest first


def declared():
    """[(exercise, rung)] of every speed test the topics declare."""
    import course.topics
    found = []
    for info in pkgutil.iter_modules(course.topics.__path__):
        module = importlib.import_module(f"course.topics.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Exercise) and value.topic == module.__name__:
                found += [(value, RUNGS[rung]) for rung in value.speed]
    return found


def against_itself(exercise, rung, runs):
    """The course's kernel timed as a student's, runs times: each run's figures, and whether the bars are met (full
    marks, the spread, and the replayed time against the same kernel called in-process, host code and all)."""
    records = [speed.timed(exercise, rung, exercise.speed[rung.name].reference, in_process=True) for _ in range(runs)]
    times = [r["ms"] for r in records]
    spread = (max(times) - min(times)) / statistics.median(times)
    replayed = statistics.median(r["ms"] / r["baselines"]["in-process"] - 1 for r in records)
    met = all(r["fraction"] == 1.0 for r in records) and spread < SPREAD and abs(replayed) <= REPLAYED
    print(f"\n{exercise.name} ({rung.name}), the course's kernel against itself, {runs} runs: "
          f"{'bar met' if met else 'BAR MISSED'}")
    for k, r in enumerate(records, 1):
        print(f"  run {k:2}: {r['ms']:.4g} ms, reference {r['reference_ms']:.4g} ms, ratio {r['ratio']:.3f}, "
              f"{r['fraction']:.0%} of the points, {r['runs']} timed calls{'' if r['settled'] else ' (not settled)'}; "
              f"called in-process {r['baselines']['in-process']:.4g} ms")
    print(f"  spread of its median over the runs: {100 * spread:.2f}% (bar: under {100 * SPREAD:g}%)")
    print(f"  replayed against called in-process, the median over the runs: {100 * replayed:+.2f}% "
          f"(bar: within {100 * REPLAYED:g}%)")
    return {"runs": records, "spread": spread, "replayed_vs_in_process": replayed,
            "full_marks": sum(r["fraction"] == 1.0 for r in records), "met": met}


def ranking(rankings):
    """The lesson's matmul kernels timed as students of the tiled exercise, rankings times: their order each time."""
    from course.topics.matmul import MATMUL_TILED
    answers = {name: sources(KERNELS[name][0])[KERNELS[name][1]] for name in RANKED}
    rounds = []
    for k in range(rankings):
        records = {name: speed.timed(MATMUL_TILED, RUNGS["cuda"], src) for name, src in answers.items()}
        order = sorted(records, key=lambda name: records[name]["ms"])
        rounds.append({"order": order, "records": records, "as_expected": tuple(order) == RANKED})
        print(f"\nranking {k + 1}: {'as benchmarks/matmul.py orders them' if tuple(order) == RANKED else 'OUT OF ORDER'}")
        for name in order:
            r = records[name]
            cublas = r["baselines"].get("cuBLAS")
            print(f"  {name:32} {r['ms']:8.4g} ms  {r['ratio']:6.3f}x the lesson's tiled kernel  "
                  f"{r['fraction']:4.0%} of the points" + (f"  {cublas / r['ms']:6.1%} of cuBLAS" if cublas else ""))
    return {"rounds": rounds, "met": all(r["as_expected"] for r in rounds)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--runs", type=int, default=10, help="speed tests of each course kernel against itself")
    parser.add_argument("--rankings", type=int, default=3, help="rankings of the lesson's matmul kernels")
    args = parser.parse_args(argv)
    if cpu_mode() and not os.environ.get(speed.CPU_SWITCH):
        raise SystemExit("needs a GPU: these are GPU timings (COURSE_SPEED_CPU=1 runs the code in CPU mode, as a "
                         "smoke test)")
    began = time.perf_counter()
    report = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
              "host": torch.cuda.get_device_name() if torch.cuda.is_available() and not cpu_mode() else "CPU mode",
              "rule": speed.RULE, "protocol": {"warmup": speed.WARMUP, "min_runs": speed.MIN_RUNS,
                                               "window": speed.WINDOW, "settled": speed.SETTLED,
                                               "max_runs": speed.MAX_RUNS, "budget_s": speed.BUDGET_S},
              "against_itself": {}}
    for exercise, rung in declared():
        report["against_itself"][f"{exercise.name}/{rung.name}"] = against_itself(exercise, rung, args.runs)
    report["ranking"] = ranking(args.rankings)
    report["seconds"] = time.perf_counter() - began
    met = all(v["met"] for v in report["against_itself"].values()) and report["ranking"]["met"]
    report["bars_met"] = met
    print(f"\n{'every bar met' if met else 'A BAR WAS MISSED'} ({report['seconds']:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

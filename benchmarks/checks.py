"""How long one CUDA check takes, by kind: `python benchmarks/checks.py [--json FILE]` (on a GPU; CPU mode runs it too).

Grayscale's L3 answer (a right one from the corpus's folder of answers) is checked as a notebook would: a plain
case, the integrity check (torch.profiler in the child) and the memory check (compute-sanitizer on a GPU). The
first check builds the module and starts the check server; the integrity check is timed twice in each server
(the server imports what the profiler needs at the first); the memory check three times (the first finds the
spare that the first check of the exercise started, the later ones start their child on the spot).
"""
import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSWER = ROOT / "tests" / "corpus" / "grayscale" / "cuda_right_2d_grid" / "rgb_to_grayscale_cuda.py"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    start = time.perf_counter()
    from course import cpu_mode, cuda_begin
    from course.harness import children as harness
    from course.topics.grayscale import check_rgb2grey_cuda
    figures = {"where": "CPU mode" if cpu_mode() else "GPU", "imports": round(time.perf_counter() - start, 2)}
    ns = {"cuda_begin": cuda_begin}
    exec(ANSWER.read_text(), ns)

    def timed(name, case):
        t = time.perf_counter()
        check_rgb2grey_cuda(ns["cuda_src"], case)
        figures.setdefault(name, []).append(round(time.perf_counter() - t, 2))
        print(f"{name}: {figures[name][-1]} s", flush=True)

    timed("first check (build, server start)", "photo")
    for _ in range(2):
        harness.restart_server()
        timed("a new server's first check", "photo")
        timed("plain check", "photo")
        timed("integrity check", "integrity")
        timed("integrity check", "integrity")
    for _ in range(3):
        timed("memory check", "memory")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()

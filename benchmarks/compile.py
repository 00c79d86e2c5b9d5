"""Compile latency of the grayscale extension: the lecture's load_inline against the course's load_cuda.

Prints cold and warm compile+run times, and where a cold build spends its time (nvcc's phases).
Run it on the GPU host: python benchmarks/compile.py [--json FILE]. Without a GPU it only compiles.
"""
import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import torch

from course import cuda_begin, has_gpu, load_cuda, photo
from course.build.toolkit import set_build_env

KERNEL = r"""
__global__ void rgb_to_grayscale_kernel(unsigned char* x, unsigned char* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.2989f*x[i] + 0.5870f*x[i+n] + 0.1140f*x[i+2*n];
}

torch::Tensor rgb_to_grayscale(torch::Tensor input) {
    CHECK_INPUT(input);
    int h = input.size(1);
    int w = input.size(2);
    auto output = torch::empty({h, w}, input.options());
    int threads = 256;
    rgb_to_grayscale_kernel<<<cdiv(w*h, threads), threads>>>(
        input.data_ptr<unsigned char>(), output.data_ptr<unsigned char>(), w*h);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""
CPP = "torch::Tensor rgb_to_grayscale(torch::Tensor input);"

# The lecture's boilerplate, as in pmpp.ipynb: torch/extension.h in the CUDA source too.
LECTURE_BEGIN = r"""
#include <torch/extension.h>
#include <stdio.h>
#include <c10/cuda/CUDAException.h>

#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

inline unsigned int cdiv(unsigned int a, unsigned int b) { return (a + b - 1) / b; }
"""


def run(module, img):
    """One call on the photo, synchronized; nothing where there is no GPU."""
    if img is not None:
        module.rgb_to_grayscale(img)
        torch.cuda.synchronize()


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def lecture_style(img, build):
    """load_inline as the lecture calls it (a fresh name, so the build is cold)."""
    ext = set_build_env()
    name = f"lecture_{uuid.uuid4().hex[:8]}"
    d = Path(build) / name
    d.mkdir(parents=True)

    def go():
        m = ext.load_inline(name=name, cpp_sources=[CPP], cuda_sources=[LECTURE_BEGIN + KERNEL],
                            functions=["rgb_to_grayscale"], build_directory=str(d), verbose=False)
        run(m, img)
    return timed(go)[0]


def phases(build_dir):
    """Re-runs the cold build's compile commands, timing nvcc's phases and the C++ binding file."""
    commands = subprocess.run(["ninja", "-t", "commands"], cwd=build_dir, capture_output=True,
                              text=True, check=True).stdout.splitlines()
    out = {}
    for cmd in commands:
        if "nvcc" in cmd and " -c " in cmd:
            report = Path(build_dir) / "nvcc-time.csv"
            subprocess.run(shlex.split(cmd) + ["--time", str(report)], cwd=build_dir,
                           capture_output=True, check=True)
            with open(report) as f:
                for row in csv.DictReader(f, skipinitialspace=True):
                    phase = (row.get("phase name ") or row.get("phase name") or "").strip()
                    value = (row.get("metric ") or row.get("metric") or "0").strip()
                    if phase and phase != "nvcc (driver)":
                        out[f"kernel.cu: {phase}"] = out.get(f"kernel.cu: {phase}", 0) + float(value) / 1000
        elif " -c " in cmd and "main.cpp" in cmd:
            out["main.cpp: c++ (bindings)"] = timed(lambda: subprocess.run(
                shlex.split(cmd), cwd=build_dir, capture_output=True, check=True))[0]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--repeat", type=int, default=2, help="edits timed after the cold build")
    p.add_argument("--skip-lecture", action="store_true", help="leave out the lecture's load_inline")
    args = p.parse_args()
    img = photo().cuda() if has_gpu() else None
    where = torch.cuda.get_device_name() if img is not None else "no GPU (compile only)"
    figures = {"device": where, "torch": torch.__version__, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as build:
        os.environ["COURSE_BUILD_DIR"] = build
        if not args.skip_lecture:
            figures["lecture load_inline, cold"] = lecture_style(img, build)
        src = cuda_begin + KERNEL
        figures["load_cuda, cold"], module = timed(lambda: load_cuda(src, CPP, ["rgb_to_grayscale"]))
        run(module, img)
        figures["load_cuda, same source again"] = timed(lambda: run(load_cuda(src, CPP, ["rgb_to_grayscale"]), img))[0]
        code = (f"import time, torch; t = time.perf_counter(); from course import load_cuda, cuda_begin; "
                f"from benchmarks.compile import KERNEL, CPP; load_cuda(cuda_begin + KERNEL, CPP, ['rgb_to_grayscale']); "
                f"print(time.perf_counter() - t)")
        figures["load_cuda, same source, new process (import + load)"] = float(subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            cwd=Path(__file__).resolve().parent.parent).stdout.split()[-1])
        edits = []
        for k in range(args.repeat):
            edited = src.replace("0.1140f", f"0.11{41 + k}f")  # a student's edit: a new source, a new build
            edits.append(timed(lambda: run(load_cuda(edited, CPP, ["rgb_to_grayscale"]), img))[0])
        figures["load_cuda, edited kernel: compile + run (each)"] = edits
        figures["cold build phases (s)"] = phases(Path(module.__file__).parent)
    width = max(len(k) for k in figures)
    for k, v in figures.items():
        if isinstance(v, dict):
            print(k)
            for kk, vv in v.items():
                print(f"    {kk:<{width - 4}}  {vv:6.2f}")
        elif isinstance(v, list):
            print(f"{k:<{width}}  " + ", ".join(f"{x:.2f}" for x in v))
        elif isinstance(v, float):
            print(f"{k:<{width}}  {v:6.2f} s")
        else:
            print(f"{k:<{width}}  {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

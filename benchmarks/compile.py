"""Compile latency of the CUDA rung: from a student's edit to the kernel's result, with load_cuda's split build.

One command prints everything and writes it as JSON:

    python benchmarks/compile.py [--json FILE]            # on the GPU host: the GPU build, and the lecture's load_inline
    python benchmarks/compile.py --json FILE              # on a machine without a GPU: CPU mode
    python benchmarks/compile.py --mode gpu               # the GPU build where there is no GPU: compiles only

Each figure is a build followed by one call on the photo (synchronized): cold (an empty build folder: nothing
cached, the precompiled headers not built yet), an edited kernel while those build in the background, the
same source again and in a new process, an edited kernel (the student's main loop, several times), an edited
kernel that moves the wrapper down a line, an edited wrapper, a wrapper only nvcc accepts (the GPU build's split
fails and nvcc builds the source as one unit: cold, then with an edited kernel), a compile error (on a GPU confirmed
by that one-unit build) and the same error again, and the same source built as one unit (COURSE_SPLIT=0, how every
build went before the split). Each build's steps are printed with their seconds:
"[cached]" steps took none, and "compile, processor seconds" is what the compilers used (less sensitive to
other work on the machine than the wall-clock figures).
"""
import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


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

# Run in a fresh process: import, then load_cuda of an unchanged source (already built), then one call.
_NEW_PROCESS = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from course import load_cuda, photo, device, synchronize
from course.topics.grayscale import CPP_SRC, CUDA_SRC
t1 = time.perf_counter()
img = photo().to(device())
m = load_cuda(CUDA_SRC, CPP_SRC, ["rgb_to_grayscale"])
m.rgb_to_grayscale(img); synchronize()
print(json.dumps({"import": t1 - t0, "load_and_run": time.perf_counter() - t1}))
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--mode", choices=("auto", "gpu", "cpu"), default="auto",
                   help="gpu: load_cuda's GPU build (without a GPU it only compiles); cpu: CPU mode; auto: gpu where "
                        "there is one, else cpu")
    p.add_argument("--repeat", type=int, default=3, help="edited kernels timed")
    p.add_argument("--lecture", choices=("auto", "yes", "no"), default="auto",
                   help="the lecture's load_inline (auto: on a GPU only; elsewhere it takes minutes)")
    args = p.parse_args()

    import torch
    has_gpu = torch.cuda.is_available()
    mode = args.mode if args.mode != "auto" else ("gpu" if has_gpu else "cpu")
    os.environ["COURSE_CPU_MODE"] = "1" if mode == "cpu" else "0"
    from course import CompileError, cuda_begin, load_cuda, photo
    from course.toolchain import objects
    from course.toolchain.load import build_report
    from course.toolchain.toolkit import set_build_env
    from course.device import device, synchronize
    from course.topics.grayscale import CPP_SRC as CPP, CUDA_SRC

    runs = mode == "cpu" or has_gpu
    img = photo().to(device()) if runs else None

    def run(module):
        if img is not None:
            module.rgb_to_grayscale(img)
            synchronize()

    figures = {
        "host": socket.gethostname(), "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "mode": mode + ("" if runs else " (compile only: no GPU)"),
        "device": torch.cuda.get_device_name() if has_gpu and mode == "gpu" else platform.processor() or "CPU",
        "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
        "load average before": [round(x, 2) for x in os.getloadavg()],
    }
    if mode == "gpu":
        try:
            figures["nvcc"] = subprocess.run([os.path.join(set_build_env().CUDA_HOME, "bin", "nvcc"), "--version"],
                                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
        except (OSError, IndexError):
            pass
    figures["c++"] = objects.compiler_version(os.environ.get("CXX") or "c++").split("  ")[0]
    timings, steps = {}, {}

    def timed(label, src, cpp=CPP, func="rgb_to_grayscale"):
        t = time.perf_counter()
        module = load_cuda(src, cpp, [func])
        run(module)
        took = time.perf_counter() - t
        report = build_report(module) or {}
        timings[label] = took
        steps[label] = {"how": report.get("how"), **{k: round(v, 3) for k, v in report.get("steps", {}).items()},
                        **({"compile, processor seconds": round(report["compile_cpu_seconds"], 3)}
                           if "compile_cpu_seconds" in report else {})}
        print(f"{label:<58} {took:7.2f} s   ({report.get('how')})", flush=True)
        for k, v in report.get("steps", {}).items():
            print(f"      {k:<52} {v:7.2f} s", flush=True)
        return module

    def refused(label, src):
        t = time.perf_counter()
        try:
            load_cuda(src, CPP, ["rgb_to_grayscale"])
            how = "built: expected a compile error"
        except CompileError as e:
            how = e.how
        timings[label] = time.perf_counter() - t
        steps[label] = {"how": how}
        print(f"{label:<58} {timings[label]:7.2f} s   ({how})", flush=True)

    src = CUDA_SRC
    with tempfile.TemporaryDirectory() as build:
        os.environ["COURSE_BUILD_DIR"] = build
        if args.lecture == "yes" or (args.lecture == "auto" and mode == "gpu" and has_gpu):
            ext = set_build_env()
            name = f"lecture_{uuid.uuid4().hex[:8]}"
            d = Path(build) / name
            d.mkdir(parents=True)
            t = time.perf_counter()
            m = ext.load_inline(name=name, cpp_sources=[CPP], cuda_sources=[LECTURE_BEGIN + src[len(cuda_begin):]],
                                functions=["rgb_to_grayscale"], build_directory=str(d), verbose=False)
            run(m)
            timings["lecture load_inline (torch/extension.h), cold"] = time.perf_counter() - t
            print(f"{'lecture load_inline (torch/extension.h), cold':<58} {timings[list(timings)[-1]]:7.2f} s")

        timed("load_cuda, cold (empty build folder)", src)
        timed("load_cuda, edited kernel, precompiled headers building", src.replace("0.1140f", "0.1149f"))
        pch = objects.wait_for_pch(build)
        for header, seconds in pch.items():
            timings[f"precompiled header {header} (background, once)"] = seconds
            print(f"{'precompiled header ' + header + ' (background, once)':<58} {seconds:7.2f} s")
        timed("load_cuda, same source again (this process)", src)
        proc = subprocess.run([sys.executable, "-c", _NEW_PROCESS], capture_output=True, text=True, cwd=ROOT,
                              env=dict(os.environ))
        if proc.returncode == 0:
            fresh = json.loads(proc.stdout.strip().splitlines()[-1])
            timings["load_cuda, same source, new process (load + run)"] = fresh["load_and_run"]
            timings["python: import torch + course, new process"] = fresh["import"]
            print(f"{'load_cuda, same source, new process (load + run)':<58} {fresh['load_and_run']:7.2f} s"
                  f"   (+ {fresh['import']:.2f} s to import torch and course)")
        else:
            print("new process failed:", proc.stderr[-2000:])
        edits = []
        for k in range(args.repeat):
            edited = src.replace("0.1140f", f"0.11{41 + k}f")  # a student's edit: a new source, a new build
            timed(f"load_cuda, edited kernel #{k + 1}", edited)
            edits.append(timings[f"load_cuda, edited kernel #{k + 1}"])
        timings["load_cuda, edited kernel (each)"] = edits
        timed("load_cuda, edited kernel, one line longer", src.replace("    int i =", "    // the pixel\n    int i ="))
        timed("load_cuda, edited wrapper", src.replace("int threads = 256;", "int threads = 128;"))
        # host code only nvcc accepts (CUDA's rsqrtf on the host): the GPU build's split fails, nvcc builds one unit
        needs_nvcc = src.replace("int threads = 256;", "int threads = (int)(512 * rsqrtf(4.0f));")
        timed("load_cuda, wrapper only nvcc accepts (rsqrtf), cold", needs_nvcc)
        timed("load_cuda, wrapper only nvcc accepts, edited kernel", needs_nvcc.replace("0.1140f", "0.1138f"))
        typo = src.replace("int threads = 256;", "int threads = 256 + thraeds;")
        refused("load_cuda, a mistyped name in the wrapper (compile error)", typo)
        refused("load_cuda, the same error again (remembered)", typo)
        os.environ["COURSE_SPLIT"] = "0"
        try:
            timed("load_cuda as one unit (COURSE_SPLIT=0), cached binding", src.replace("0.1140f", "0.1139f"))
        finally:
            del os.environ["COURSE_SPLIT"]

    figures["seconds"] = timings
    figures["steps"] = steps
    bars = {"gpu": {"edited kernel": 5.0, "cold": 10.0}, "cpu": {"edited kernel": 3.0}}[mode]
    worst_edit = max(edits) if edits else None
    verdict = {"edited kernel, worst (s)": worst_edit, "edited kernel bar (s)": bars["edited kernel"],
               "edited kernel within bar": worst_edit is not None and worst_edit <= bars["edited kernel"]}
    if "cold" in bars:
        cold = timings["load_cuda, cold (empty build folder)"]
        verdict.update({"cold (s)": cold, "cold bar (s)": bars["cold"], "cold within bar": cold <= bars["cold"]})
    figures["bar"] = verdict
    figures["load average after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(verdict))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

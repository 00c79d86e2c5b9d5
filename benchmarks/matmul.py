"""Matmul speed on the GPU: the lessons' kernels against cuBLAS, at 1024 and 4096.

The kernels are read from the notebooks themselves (source/matmul/04_L3_cuda and 05_tiling: the cells
that assign `*_src = cuda_begin + ...`, and the solutions), so the figures are those of what the course
teaches. Run it on the GPU host: python benchmarks/matmul.py [--json FILE] [--sizes 1024 4096].
"""
import argparse
import json
import re
import time
from pathlib import Path

import nbformat
import torch

from course import cuda_begin, cuda_time, load_cuda

ROOT = Path(__file__).resolve().parent.parent
# name in the report -> (notebook, variable holding the source, function, extra arguments)
KERNELS = {
    "naive (L3)": ("04_L3_cuda", "cuda_src", "matmul", ()),
    "tiled 16 (static)": ("05_tiling", "tiled_src", "matmul_static", ()),
    "tiled 32 (template)": ("05_tiling", "dyn_src", "matmul_tiled", (32,)),
    "tiled, 2x2 a thread": ("05_tiling", "coarse_src", "matmul_2x2", ()),
    "8x8 a thread (register tiling)": ("05_tiling", "rt_src", "matmul_rt", ()),
}


def sources(notebook):
    """{variable: CUDA source} for each cell of a source notebook that assigns one from cuda_begin."""
    nb = nbformat.read(ROOT / "source" / "matmul" / f"{notebook}.ipynb", as_version=4)
    found = {}
    for cell in nb.cells:
        m = re.match(r"(\w+_src) = cuda_begin \+ r\"\"\"(.*?)\"\"\"", cell.source, re.S)
        if cell.cell_type == "code" and m:
            found[m.group(1)] = cuda_begin + m.group(2)
    return found


def declaration(src, func):
    """The C++ declaration of func as cuda_src defines it (the lecture's get_sig)."""
    m = re.search(rf"^(torch::Tensor\s+{func}\s*\([^)]*\))\s*\{{", src, re.M)
    return m.group(1) + ";"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("needs a GPU: these are GPU timings")
    funcs = {}
    for name, (notebook, var, func, extra) in KERNELS.items():
        src = sources(notebook)[var]
        module = load_cuda(src, declaration(src, func), [func], opt=True)
        funcs[name] = (getattr(module, func), extra)
    report = {"host": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
              "date": time.strftime("%Y-%m-%d"), "timer": "course.cuda_time: CUDA events, 3 warm-up calls, median",
              "sizes": {}}
    for size in args.sizes:
        reps = 20 if size <= 2048 else 10
        a, b = torch.randn(size, size, device="cuda"), torch.randn(size, size, device="cuda")
        exact = a.double() @ b.double()
        rows = {}
        for name, (f, extra) in funcs.items():
            err = float((f(a, b, *extra).double() - exact).abs().max())
            rows[name] = {"ms": cuda_time(f, a, b, *extra, reps=reps), "max_error": err}
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            err = float((torch.matmul(a, b).double() - exact).abs().max())
            rows["cuBLAS TF32" if tf32 else "cuBLAS fp32"] = {"ms": cuda_time(torch.matmul, a, b, reps=reps), "max_error": err}
        torch.backends.cuda.matmul.allow_tf32 = False
        cublas = rows["cuBLAS fp32"]["ms"]
        print(f"\n{size}x{size}x{size} ({reps} repeats each)")
        for name, row in rows.items():
            row["tflops"] = 2 * size ** 3 / row["ms"] / 1e9
            row["of_cublas_fp32"] = cublas / row["ms"]
            print(f"  {name:32} {row['ms']:9.3f} ms {row['tflops']:7.1f} TFLOP/s {100 * row['of_cublas_fp32']:6.1f}% "
                  f"of cuBLAS fp32   max error {row['max_error']:.2g}")
        report["sizes"][str(size)] = rows
        del a, b, exact
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

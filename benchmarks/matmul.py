"""Matmul speed on the GPU: the lessons' kernels against cuBLAS, at 1024 and 4096.

The kernels are read from the notebooks themselves (source/matmul/04_L3_cuda and 05_tiling: the cells
that assign `*_src = cuda_begin + ...`, and the solutions), so the figures are those of what the course
teaches. One more is the benchmark's own: the 16x16 tiled kernel (one output a thread) reading shared
memory four floats at a time, to measure what 05_tiling says of it (no faster: an SM's shared memory
delivers 128 bytes a cycle however they are asked for, and each multiply-add needs 8 bytes a thread).
The Triton kernel is 06_triton's solution (matmul_kernel, input_precision="ieee"), the speed test's reference
(course.topics.matmul.TRITON_SRC, which a test holds to the notebook's solution cell), imported from a file of its
text, launched with the lesson's 64x64x32 tiles and with smaller and larger ones (TRITON_TILES); in CPU mode
it is skipped, with a line saying why.
Run it on the GPU host: python benchmarks/matmul.py [--json FILE] [--sizes 1024 4096].
"""
import argparse
import importlib.util
import json
import re
import time
from pathlib import Path

import nbformat
import torch

from course import cpu_mode, cuda_begin, cuda_time, load_cuda
from course.harness.triton import written
from course.topics.matmul import TRITON_SRC

ROOT = Path(__file__).resolve().parent.parent
# name in the report -> (notebook, variable holding the source, function, extra arguments)
KERNELS = {
    "naive (L3)": ("04_L3_cuda", "cuda_src", "matmul", ()),
    "tiled 16 (static)": ("05_tiling", "tiled_src", "matmul_static", ()),
    "tiled 32 (template)": ("05_tiling", "dyn_src", "matmul_tiled", (32,)),
    "tiled 16, float4 reads": (None, "WIDE_SRC", "matmul_wide", ()),
    "tiled, 2x2 a thread": ("05_tiling", "coarse_src", "matmul_2x2", ()),
    "8x8 a thread (register tiling)": ("05_tiling", "rt_src", "matmul_rt", ()),
}

# name in the report -> the Triton lesson's kernel launched with (BM, BN, BK, num_warps, num_stages)
TRITON_TILES = {
    "Triton (06), 32x32x32": (32, 32, 32, 4, 3),
    "Triton (06), 64x64x32 as taught": (64, 64, 32, 4, 3),
    "Triton (06), 128x64x32": (128, 64, 32, 4, 4),
    "Triton (06), 128x128x32, 8 warps": (128, 128, 32, 8, 3),
}


# The tiled kernel with 128-bit shared-memory reads: m's tile row-major, n's tile stored transposed, so the four
# values a thread needs next are adjacent in both; rows padded by 4 floats (16-byte aligned, fewer bank conflicts).
WIDE_SRC = cuda_begin + r"""
constexpr int TW = 16, TK = 16;
__global__ void matmul_wide_k(const float* __restrict__ m, const float* __restrict__ n, float* __restrict__ out,
                              int h, int w, int k) {
    __shared__ __align__(16) float ms[TW][TK + 4];
    __shared__ __align__(16) float nt[TW][TK + 4];
    int tc = threadIdx.x, tr = threadIdx.y;
    int r = blockIdx.y*TW + tr, c = blockIdx.x*TW + tc;
    float p = 0.0f;
    for (int idx = 0; idx < k; idx += TK) {
        ms[tr][tc] = r < h && idx + tc < k ? m[r*k + idx + tc] : 0.0f;
        nt[tc][tr] = c < w && idx + tr < k ? n[(idx + tr)*w + c] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int i = 0; i < TK; i += 4) {
            float4 a = *reinterpret_cast<const float4*>(&ms[tr][i]);
            float4 b = *reinterpret_cast<const float4*>(&nt[tc][i]);
            p += a.x*b.x; p += a.y*b.y; p += a.z*b.z; p += a.w*b.w;
        }
        __syncthreads();
    }
    if (r < h && c < w) out[r*w + c] = p;
}

torch::Tensor matmul_wide(torch::Tensor m, torch::Tensor n) {
    CHECK_INPUT(m); CHECK_INPUT(n);
    int h = m.size(0), w = n.size(1), k = m.size(1);
    TORCH_CHECK(k == n.size(0), "Size mismatch!");
    auto out = torch::empty({h, w}, m.options());
    matmul_wide_k<<<dim3(cdiv(w, TW), cdiv(h, TW)), dim3(TW, TW)>>>(m.data_ptr<float>(), n.data_ptr<float>(),
                                                                   out.data_ptr<float>(), h, w, k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def sources(notebook):
    """{variable: CUDA source} for each cell of a source notebook that assigns one from cuda_begin."""
    nb = nbformat.read(ROOT / "source" / "matmul" / f"{notebook}.ipynb", as_version=4)
    found = {}
    for cell in nb.cells:
        m = re.match(r"(\w+_src) = cuda_begin \+ r\"\"\"(.*?)\"\"\"", cell.source, re.S)
        if cell.cell_type == "code" and m:
            found[m.group(1)] = cuda_begin + m.group(2)
    return found


def triton_launches():
    """{name: launch(a, b)} of the lesson's matmul_kernel with each of TRITON_TILES (Triton compiles it at the first)."""
    import triton
    path = written(TRITON_SRC)  # a file: Triton reads a kernel's source from it
    spec = importlib.util.spec_from_file_location("lesson_06_triton", path)
    lesson = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lesson)

    def tiled(bm, bn, bk, warps, stages):
        def launch(a, b):
            h, k = a.shape
            w = b.shape[1]
            out = torch.empty(h, w, dtype=a.dtype, device=a.device)
            lesson.matmul_kernel[(triton.cdiv(w, bn), triton.cdiv(h, bm))](
                a, b, out, h, w, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
                BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages)
            return out
        return launch
    return {name: tiled(*tiles) for name, tiles in TRITON_TILES.items()}


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
        src = sources(notebook)[var] if notebook else globals()[var]
        module = load_cuda(src, declaration(src, func), [func], opt=True)
        funcs[name] = (getattr(module, func), extra)
    if cpu_mode():
        print("Triton: skipped in CPU mode: its interpreter runs each program in Python with numpy, there is no GPU "
              "time to measure")
    else:
        funcs.update({name: (launch, ()) for name, launch in triton_launches().items()})
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

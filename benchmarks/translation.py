"""Drill 9's figures: where a faithful-looking translation of an L2 kernel breaks on a GPU.

`python benchmarks/translation.py --json out.json [--runs 5]`. On a GPU: the 32-bit index's overflow (the lessons'
grayscale kernel as to_cuda translates it, on images just below and just past 2**31 indices; a 2D copy indexed
row*w + col past 2**31), the pixels a double literal and nvcc's FMA change, the counts a `+=` histogram loses, what
a chained guard copied into C reads. Each overflow run is a child process (a memory fault breaks the CUDA context).
In CPU mode only the small measurements run (the overflow's tensors would take hours).
"""
import argparse
import datetime
import json
import platform
import sys
import tempfile
import textwrap
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course import cdiv, cpu_mode, cuda_begin, device, load_cuda, photo, rgb2grey, rounding_edges, run_in_child, to_cuda  # noqa: E402

KERNELS = Path(tempfile.mkdtemp()) / "translation_kernels.py"  # to_cuda reads a kernel's source from its file
KERNELS.write_text(textwrap.dedent('''
    def rgb2grey_bk(blockidx, threadidx, blockdim, x, out, n):
        i = blockidx*blockdim + threadidx
        if i < n:
            out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]


    def copy2d_bk(blockidx, threadidx, blockdim, x, out, h, w):
        r = blockidx.y*blockdim.y + threadidx.y
        c = blockidx.x*blockdim.x + threadidx.x
        if r < h and c < w:
            out[r*w + c] = x[r*w + c]


    def hist_bk(blockidx, threadidx, blockdim, x, counts, n):
        i = blockidx*blockdim + threadidx
        if i < n:
            counts[int(x[i])] += 1


    def smooth_bk(blockidx, threadidx, blockdim, x, out, n):
        i = blockidx*blockdim + threadidx
        if 0 < i < n - 1:
            out[i] = (x[i-1] + x[i] + x[i+1]) / 3
        elif i < n:
            out[i] = x[i]
'''))
sys.path.insert(0, str(KERNELS.parent))
import translation_kernels as K  # noqa: E402

U8, F32, I32 = (torch.zeros(1, dtype=d) for d in (torch.uint8, torch.float32, torch.int32))


def build(t, replace=()):
    """load_cuda of a translation, with text replaced in its kernel (a hand translation that copies Python's text)."""
    kernel = t.kernel
    for old, new in replace:
        assert old in kernel, (old, kernel)
        kernel = kernel.replace(old, new)
    src = cuda_begin + "\n" + kernel + "\n" + t.wrapper
    return src, load_cuda(src, t.cpp_src, [t.func])


OVERFLOW_1D = '''
import torch
from course import load_cuda, cdiv, rgb2grey
module = load_cuda(src, cpp, [func])
x = torch.randint(0, 256, (3, 1, n), dtype=torch.uint8, device="cuda")
out = torch.empty(n, dtype=torch.uint8, device="cuda")
getattr(module, func)(cdiv(n, 256), 256, x.flatten(), out, n)
torch.cuda.synchronize()
bad = (out.view(1, n) != rgb2grey(x)).flatten()
print(int(bad.sum()), int(bad.nonzero()[0]) if bad.any() else -1)
'''
OVERFLOW_2D = '''
import torch
from course import load_cuda, cdiv
module = load_cuda(src, cpp, [func])
x = torch.randint(1, 256, (h * w,), dtype=torch.uint8, device="cuda")
out = torch.zeros(h * w, dtype=torch.uint8, device="cuda")
getattr(module, func)((cdiv(w, 32), cdiv(h, 32)), (32, 32), x, out, h, w)
torch.cuda.synchronize()
bad = out != x
print(int(bad.sum()), int(bad.nonzero()[0]) if bad.any() else -1)
'''


def overflow():
    t = to_cuda(K.rgb2grey_bk, U8, U8, 1)
    load_cuda(t.cuda_src, t.cpp_src, [t.func])
    out = {"kernel": "the lessons' rgb2grey_bk as to_cuda translates it (int i, int n): x[i + 2*n]", "runs": []}
    for n in (715_827_882, 715_827_883):
        run = run_in_child(OVERFLOW_1D, src=t.cuda_src, cpp=t.cpp_src, func=t.func, n=n, timeout=300)
        differ = run.stdout.split() if run.ok else None
        out["runs"].append({"pixels": n, "largest index i + 2*n": 3 * n - 1, "ok": run.ok,
                            "error": None if run.ok else run.error,
                            "pixels differ": int(differ[0]) if differ else None,
                            "first differing pixel": int(differ[1]) if differ else None})
    t2 = to_cuda(K.copy2d_bk, U8, U8, 1, 1)
    load_cuda(t2.cuda_src, t2.cpp_src, [t2.func])
    out2 = {"kernel": "a 2D copy out[r*w + c] = x[r*w + c], translated (int r, c, w)", "runs": []}
    for h, w in ((46340, 46340), (46341, 46341)):
        run = run_in_child(OVERFLOW_2D, src=t2.cuda_src, cpp=t2.cpp_src, func=t2.func, h=h, w=w, timeout=300)
        differ = run.stdout.split() if run.ok else None
        out2["runs"].append({"h": h, "w": w, "elements": h * w, "ok": run.ok, "error": None if run.ok else run.error,
                             "elements differ": int(differ[0]) if differ else None,
                             "first differing element": int(differ[1]) if differ else None})
    return [out, out2]


def literals():
    t = to_cuda(K.rgb2grey_bk, U8, U8, 1)
    _, faithful = build(t)
    _, double = build(t, [("0.2989f", "0.2989"), ("0.587f", "0.5870"), ("0.114f", "0.1140")])
    g = torch.Generator().manual_seed(1)
    images = {"the 317 rounding-edge colours": rounding_edges(), "the photo (600x512)": photo(),
              "random 1066x1600 (seed 1)": torch.randint(0, 256, (3, 1066, 1600), dtype=torch.uint8, generator=g),
              "random 1066x1600 (seed 2)": torch.randint(0, 256, (3, 1066, 1600), dtype=torch.uint8,
                                                         generator=torch.Generator().manual_seed(2))}
    out = {}
    for name, img in images.items():
        n = img.shape[1] * img.shape[2]
        ref = rgb2grey(img).flatten()
        row = {"pixels": n}
        for label, module in (("to_cuda (0.2989f)", faithful), ("text copied (0.2989, double)", double)):
            x, res = img.flatten().to(device()), torch.empty(n, dtype=torch.uint8, device=device())
            getattr(module, t.func)(cdiv(n, 256), 256, x, res, n)
            row[label] = int((res.cpu() != ref).sum())
        out[name] = row
    return out


def race(runs):
    t = to_cuda(K.hist_bk, U8, I32, 1)
    _, plain = build(t)
    _, atomic = build(t, [("counts[(int)x[i]] += 1;", "atomicAdd(&counts[(int)x[i]], 1);")])
    g = torch.Generator().manual_seed(3)
    inputs = {"the photo's red values": photo()[0].flatten().contiguous(),
              "1066x1600 random values": torch.randint(0, 256, (1066 * 1600,), dtype=torch.uint8, generator=g),
              "2**20 copies of 42": torch.full((2**20,), 42, dtype=torch.uint8)}
    out = {}
    for name, x in inputs.items():
        x = x.to(device())
        row = {"values": x.numel()}
        for label, module in (("+= (to_cuda)", plain), ("atomicAdd", atomic)):
            counted = []
            for _ in range(runs):
                counts = torch.zeros(256, dtype=torch.int32, device=x.device)
                getattr(module, t.func)(cdiv(x.numel(), 256), 256, x, counts, x.numel())
                counted.append(int(counts.sum()))
            row[label + ": counted"] = counted
        out[name] = row
    return out


GUARD = '''
import torch
from course import load_cuda, cdiv, device
module = load_cuda(src, cpp, [func])
x = (torch.rand(n, generator=torch.Generator().manual_seed(n)) * 100).to(device())
right = torch.cat([x[:1], (x[:-2] + x[1:-1] + x[2:]) / 3, x[-1:]]).cpu()
for _ in range(runs):
    res = torch.empty_like(x)
    getattr(module, func)(cdiv(n, 256), 256, x, res, n)
    print(*(res.cpu() != right).nonzero().flatten().tolist()[:4], sep=",")
'''


def guard(runs):
    """The 3-point mean translated (&&) and with Python's guard copied into C: which elements come out wrong, in a
    child each (the copied guard lets the threads past the end write too)."""
    t = to_cuda(K.smooth_bk, F32, F32, 1)
    out = {}
    for n in (1000, 1 << 20):
        row = {"values": n, "threads past the end": cdiv(n, 256) * 256 - n}
        for label, replace in (("to_cuda (&&)", ()), ("text copied (0 < i < n - 1)",
                                                       [("if (0 < i && i < n - 1) {", "if (0 < i < n - 1) {")])):
            src, _ = build(t, replace)
            run = run_in_child(GUARD, src=src, cpp=t.cpp_src, func=t.func, n=n, runs=runs, timeout=120)
            row[label] = {"ok": run.ok, "error": None if run.ok else run.error,
                          "first wrong elements, each run": run.stdout.split()}
        out[str(n)] = row
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    where = "CPU mode" if cpu_mode() else torch.cuda.get_device_name()
    result = {"where": where, "date": datetime.date.today().isoformat(), "runs": args.runs, "torch": torch.__version__,
              "host": platform.node(), "literals": literals(), "race": race(args.runs), "guard": guard(args.runs)}
    if not cpu_mode():
        result["overflow"] = overflow()
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

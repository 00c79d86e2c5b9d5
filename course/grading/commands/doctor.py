"""`course doctor`: is this machine ready to grade? Each check says ok, or what is wrong and how to fix it."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ...device import nvidia_smi
from ..run.layout import CourseError

TINY = r'''
__global__ void add_one_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + 1.0f;
}

torch::Tensor add_one(torch::Tensor x) {
    CHECK_INPUT(x);
    auto out = torch::empty_like(x);
    int n = x.numel();
    add_one_kernel<<<cdiv(n, 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
'''

# Run in a fresh process: compiles the tiny kernel with load_cuda and runs it where the lessons would.
_TINY_RUN = r'''
import sys, time, torch
from course import cpu_mode, cuda_begin, device, load_cuda, synchronize
t = time.perf_counter()
m = load_cuda(cuda_begin + sys.argv[1], "torch::Tensor add_one(torch::Tensor x);", ["add_one"])
built = time.perf_counter() - t
x = torch.arange(1000, dtype=torch.float32, device=device())
y = m.add_one(x); synchronize()
assert torch.equal(y.cpu(), x.cpu() + 1), "wrong result"
print(f"{'CPU mode' if cpu_mode() else torch.cuda.get_device_name()}: built in {built:.1f} s, ran right")
'''

# Run in a fresh process: a tiny Triton kernel, interpreted in CPU mode (as the Triton checks run it), compiled on a GPU.
_TINY_TRITON = r'''
import os, time
from course import cpu_mode, device
if cpu_mode():
    os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl

@triton.jit
def add_one(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0)*BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)

t = time.perf_counter()
x = torch.arange(1000, dtype=torch.float32, device=device())
y = torch.empty_like(x)
add_one[(triton.cdiv(1000, 256),)](x, y, 1000, BLOCK_SIZE=256)
assert torch.equal(y.cpu(), x.cpu() + 1), "wrong result"
print(f"{'interpreted (CPU mode)' if cpu_mode() else 'compiled for ' + torch.cuda.get_device_name()}, "
      f"ran right in {time.perf_counter() - t:.1f} s")
'''


def triton_pin():
    """The triton version torch's wheel asks for, e.g. "3.6.0" (its metadata's `triton==` or `~=`); None if none."""
    from importlib.metadata import PackageNotFoundError, requires
    try:
        found = [re.match(r"(?:pytorch-)?triton\s*[=~]=\s*([\w.]+)", r) for r in requires("torch") or []]
    except PackageNotFoundError:
        return None
    return next((m.group(1) for m in found if m), None)


def check_triton(r, run_kernel=True):
    """Reports whether triton imports, is the version torch was built with, and runs a tiny kernel (the Triton lessons)."""
    try:
        import triton
    except ImportError as e:
        r.fail(f"triton cannot be imported ({e}): the Triton lesson and its checks cannot run",
               "on Linux torch's wheel brings the triton it was built with: pip install --force-reinstall torch "
               "(Triton has no macOS or Windows wheels: use Linux, or a Linux container)")
        return
    pin = triton_pin()
    if pin and pin.split(".")[:2] != triton.__version__.split(".")[:2]:
        r.fail(f"triton {triton.__version__}, but torch was built with triton {pin}",
               f"{sys.executable} -m pip install triton=={pin} (or reinstall torch, which brings its own)")
    else:
        r.ok(f"triton {triton.__version__}" + (f" (torch asks for {pin})" if pin else ""))
    if not run_kernel:
        return
    import tempfile
    with tempfile.TemporaryDirectory(prefix="course-doctor-") as tmp:  # Triton's compiler reads a kernel's source file
        script = Path(tmp) / "tiny_triton.py"
        script.write_text(_TINY_TRITON)
        try:
            proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                                  env=dict(os.environ, PYTHONWARNINGS="ignore"))
        except subprocess.TimeoutExpired:
            r.fail("a tiny Triton kernel took over 5 minutes", "check the machine's load")
            return
    if proc.returncode == 0:
        r.ok(f"a tiny Triton kernel {(proc.stdout.strip().splitlines() or [''])[-1]}")
    else:
        r.fail("a tiny Triton kernel did not run:\n      " + proc.stderr.strip()[-1500:].replace("\n", "\n      "),
               "in CPU mode Triton's interpreter needs only numpy; on a GPU, a triton that matches torch and the driver")


class Report:
    """The doctor's findings, printed as they come."""

    def __init__(self):
        self.failed = 0

    def ok(self, what):
        """A check that passed."""
        print(f"ok    {what}", flush=True)

    def note(self, what):
        """Something to know that is not a failure."""
        print(f"--    {what}", flush=True)

    def fail(self, what, fix):
        """A check that failed, and how to fix it."""
        self.failed += 1
        print(f"FAIL  {what}\n      fix: {fix}", flush=True)


def _version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout + out.stderr).strip()
    return text if out.returncode == 0 else None


def gpus():
    """[(name, driver, memory)] from nvidia-smi, [] without it; None when nvidia-smi fails."""
    found = nvidia_smi("name", "driver_version", "memory.total", timeout=60)
    return None if found is None else [tuple(row) for row in found]


def check_sandbox(r):
    """One line per layer of the sandbox student code runs in (course/sandbox.py): what it keeps out, or, where this
    host lacks it, what grading then does."""
    from course import sandbox
    if not sandbox.wanted():
        r.note("COURSE_SANDBOX=0 is set: student code runs with the grader's rights (no sandbox at all)")
        return
    for name, has in sandbox.layers().items():
        if has:
            r.ok(f"sandbox {name}: {sandbox.LAYERS[name]}")
        else:
            r.note(f"sandbox {name}: missing here; {sandbox.MISSING.get(name, 'grading goes on without it')}")


def doctor(root=".", compile_kernel=True):
    """Checks this machine for grading; returns 1 when something must be fixed first."""
    r = Report()
    v = sys.version_info
    if v >= (3, 10):
        r.ok(f"python {v.major}.{v.minor}.{v.micro} ({sys.executable})")
    else:
        r.fail(f"python {v.major}.{v.minor}: the course needs 3.10 or newer", "install Python 3.10+ and `make setup`")

    try:
        import torch
    except ImportError as e:
        r.fail(f"torch cannot be imported ({e})", "`make setup` (or pip install -e . in the course folder)")
        return 1
    built_for = torch.version.cuda
    r.ok(f"torch {torch.__version__}" + (f" (built for CUDA {built_for})" if built_for else " (a CPU-only build)"))
    check_triton(r, run_kernel=compile_kernel)

    found = gpus()
    env_cpu = os.environ.get("COURSE_CPU_MODE") == "1"
    from course.toolchain.toolkit import cuda_home, cuda_tool
    from course.device import cpu_mode
    if found is None:
        r.fail("nvidia-smi is installed but fails: the NVIDIA driver is not loaded",
               "load the driver (reboot after installing it), or grade in CPU mode with COURSE_CPU_MODE=1")
    elif found:
        for name, driver, mem in found:
            r.ok(f"GPU {name}, driver {driver}, {mem}")
        if not torch.cuda.is_available():
            r.fail("torch sees no GPU although nvidia-smi lists one",
                   f"install a torch built for CUDA that driver {found[0][1]} supports (torch.version.cuda is "
                   f"{built_for or 'none: a CPU-only build'}); see https://pytorch.org/get-started/locally/")
        else:
            r.ok(f"torch sees {torch.cuda.device_count()} GPU(s), compute capability "
                 f"{'.'.join(map(str, torch.cuda.get_device_capability()))}")
    else:
        r.note("no NVIDIA GPU here: the CUDA exercises run in CPU mode (g++ builds the kernels; timings are not "
               "GPU timings); grade on a GPU host for GPU verdicts")
    if env_cpu:
        r.note("COURSE_CPU_MODE=1 is set: CPU mode even where there is a GPU")
    gpu_mode = not cpu_mode()

    nvcc = cuda_tool("nvcc")
    if nvcc:
        text = _version([nvcc, "--version"]) or ""
        release = re.search(r"release (\d+\.\d+)", text)
        r.ok(f"nvcc {release.group(1) if release else '?'} ({nvcc}; CUDA_HOME {cuda_home()})")
        if release and built_for and release.group(1).split(".")[0] != built_for.split(".")[0]:
            r.fail(f"nvcc is CUDA {release.group(1)} but torch was built for CUDA {built_for}",
                   "install the CUDA toolkit whose major version matches torch's, and point CUDA_HOME at it")
    elif gpu_mode:
        r.fail("nvcc not found: the CUDA exercises cannot be compiled for the GPU",
               f"install the CUDA toolkit {built_for or ''} (nvcc) and put its bin/ on PATH, or set CUDA_HOME")
    else:
        r.note("nvcc not found (not needed in CPU mode)")

    sanitizer = cuda_tool("compute-sanitizer")
    if sanitizer:
        r.ok(f"compute-sanitizer ({sanitizer})")
    elif gpu_mode:
        r.fail("compute-sanitizer not found: the memory and race checks fail every student",
               "it ships with the CUDA toolkit (bin/compute-sanitizer): install the toolkit fully, or set CUDA_HOME")
    else:
        r.note("compute-sanitizer not found (CPU mode's memory check does without it)")

    cxx = os.environ.get("CXX") or "g++"
    text = _version([cxx, "--version"])
    if text:
        r.ok(f"{cxx}: {text.splitlines()[0]}")
    else:
        r.fail(f"{cxx} not found: neither mode can build the C++ wrapper of a CUDA exercise",
               "install g++ (Debian/Ubuntu: sudo apt-get install g++), or set CXX")

    ninja = shutil.which("ninja") or shutil.which("ninja", path=str(Path(sys.executable).parent))
    if ninja:
        r.ok(f"ninja {(_version([ninja, '--version']) or '?').strip()}")
    else:
        r.fail("ninja not found: torch's C++ extension builds need it", f"{sys.executable} -m pip install ninja")

    for module, fix in (("nbgrader", "make setup"), ("ipykernel", "make setup"), ("nbclient", "make setup")):
        try:
            mod = __import__(module)
            r.ok(f"{module} {getattr(mod, '__version__', '')}")
        except ImportError:
            r.fail(f"{module} cannot be imported", fix)
    try:
        from jupyter_client.kernelspec import KernelSpecManager
        if "python3" in KernelSpecManager().find_kernel_specs():
            r.ok("Jupyter kernel python3")
        else:
            r.fail("no Jupyter kernel named python3: nbgrader cannot run notebooks",
                   f"{sys.executable} -m ipykernel install --user --name python3")
    except Exception as e:  # noqa: B902
        r.fail(f"Jupyter's kernels cannot be listed ({e})", "make setup")

    from course.toolchain import build_root
    build = build_root()
    build.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(build).free / 2**30
    (r.ok if free > 5 else r.fail)(f"{free:.0f} GiB free where builds are kept ({build})",
                                   *([] if free > 5 else ["free some space, or set COURSE_BUILD_DIR to a bigger disk"]))

    check_sandbox(r)

    try:
        from ..run.layout import course_root
        course = course_root(root)
        from ..nbgrader.seeds import load_secret
        r.ok(f"course folder {course}" + ("" if load_secret(course) else
                                          " (no .grading_secret yet: `course grade` creates one; keep it)"))
    except CourseError:
        r.note(f"{Path(root).resolve()} is not a course folder (no nbgrader_config.py): run doctor there to check it")

    if compile_kernel:
        t = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-c", _TINY_RUN, TINY], capture_output=True, text=True, timeout=900,
                                  env=dict(os.environ, PYTHONWARNINGS="ignore"))
            out = (proc.stdout.strip().splitlines() or [""])[-1]
            if proc.returncode == 0:
                r.ok(f"a tiny kernel compiled and ran: {out} ({time.perf_counter() - t:.0f} s in all)")
            else:
                r.fail("a tiny kernel did not compile or run:\n      " + proc.stderr.strip()[-1500:].replace("\n", "\n      "),
                       "fix what the failures above name (nvcc, g++, CUDA_HOME); in CPU mode only g++ is needed")
        except subprocess.TimeoutExpired:
            r.fail("compiling and running a tiny kernel took over 15 minutes", "check the machine's load and disk")
    print("ready to grade" if not r.failed else f"{r.failed} problem(s) to fix before grading")
    return 1 if r.failed else 0

"""The drills' helpers and checks: child processes, printf capture, PTX, the rounding edges, and each judge's evidence."""
import ctypes
import json
import shutil
import statistics
import threading
import time
from pathlib import Path

import pytest
import torch

import course
from course.harness.exercise import Case
from course.processes import run_in_child, run_in_session
from course.topics import blocking, plan, printf, rounding, rows
from tests.support import ROOT

DRILLS = sorted((ROOT / "source" / "drills").glob("*.ipynb"))


# ---- the notebooks, their release and the example students --------------------------------------------------

def test_nine_drills_numbered_in_order_each_titled_drill_n():
    assert [p.name[:3] for p in DRILLS] == [f"0{k}_" for k in range(1, 10)]
    for k, path in enumerate(DRILLS, 1):
        first = "".join(json.loads(path.read_text())["cells"][0]["source"])
        assert first.startswith(f"# Drill {k}: "), path.name


def _cells(path):
    return json.loads(Path(path).read_text())["cells"]


def test_released_drills_keep_no_solution_and_no_rubric():
    for path in sorted((ROOT / "release" / "drills").glob("*.ipynb")):
        for c in _cells(path):
            meta = c["metadata"].get("nbgrader", {})
            src = "".join(c["source"])
            assert "BEGIN SOLUTION" not in src and "Rubric" not in src and "Model answer" not in src, path.name
            if meta.get("solution") and c["cell_type"] == "markdown":
                assert src.strip() == "YOUR ANSWER HERE", (path.name, meta["grade_id"])
            if meta.get("solution") and "cuda_begin" in src:
                assert "// YOUR CODE HERE" in src and "NotImplementedError" not in src, (path.name, meta["grade_id"])


def _solution_ids():
    return {c["metadata"]["nbgrader"]["grade_id"] for p in DRILLS for c in _cells(p)
            if c["metadata"].get("nbgrader", {}).get("solution")}


def test_alice_answers_every_solution_cell_and_bob_makes_one_mistake_a_drill():
    examples = ROOT / "examples" / "drills"
    alice = {p.stem for p in (examples / "alice").glob("*.py")}
    assert alice == _solution_ids()
    changed = [p.stem for p in sorted((examples / "bob").glob("*.py"))
               if "answer" not in p.stem and "plan" not in p.stem
               and p.read_text() != (examples / "alice" / p.name).read_text()]
    drills = sorted({name.split("_")[0] for name in changed})
    assert drills == [f"drill{k}" for k in range(1, 10)], changed
    assert not list((examples / "carol").glob("*.py"))


# ---- run_in_child ----------------------------------------------------------------------------------------------

def test_a_child_reports_the_line_that_raised_its_error_and_sees_its_variables_and_environment():
    run = run_in_child("import os\nprint(os.environ['COURSE_T'], n)\nx = 1\nx = x / 0\n", env={"COURSE_T": "seven"}, n=7)
    assert not run.ok and run.line == 4 and run.source_line() == "x = x / 0"
    assert run.error == "ZeroDivisionError: division by zero" and run.stdout.split() == ["seven", "7"]
    assert "raised at line 4" in str(run) and "COURSE_T=seven" in str(run)


def test_a_child_that_crashes_hangs_or_exits_is_reported_as_such():
    assert run_in_child("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)").error == "killed by SIGSEGV"
    hung = run_in_child("import time\ntime.sleep(30)", timeout=2)
    assert hung.returncode is None and "time limit" in hung.error
    assert run_in_child("import sys\nsys.exit(3)").returncode == 3
    assert run_in_child("print('fine')").ok


def test_a_child_under_another_command_is_a_fresh_process():
    run = run_in_child("import sys\nprint(sys.argv[0].endswith('processes.py'))\nraise KeyError(5)", under=["env"])
    assert run.stdout.strip() == "True" and run.line == 3 and run.error == "KeyError: 5"


def test_a_command_in_a_session_of_its_own_is_killed_whole_at_its_time_limit(tmp_path):
    log, pid_file, running = tmp_path / "log.txt", tmp_path / "grandchild.pid", set()
    script = f"sleep 60 & echo $! > {pid_file}; echo started; wait"
    assert run_in_session(["bash", "-c", script], None, log, 2, running) is None
    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    deadline = time.monotonic() + 10
    while stat.exists() and stat.read_text().split(") ")[-1][0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.1)  # what the session started dies with it (a zombie until someone reaps it)
    assert not stat.exists() or stat.read_text().split(") ")[-1][0] == "Z"
    assert log.read_text() == "started\n" and not running
    seen = []
    watch = threading.Thread(target=lambda: (time.sleep(0.5), seen.append(len(running))))
    watch.start()
    assert run_in_session(["bash", "-c", "sleep 1; echo again; exit 3"], None, log, 30, running) == 3
    watch.join()
    assert seen == [1] and not running and log.read_text() == "started\nagain\n"


def test_variables_must_be_plain_data():
    with pytest.raises(TypeError, match="strings, numbers"):
        run_in_child("pass", x=object())


# ---- printf capture ----------------------------------------------------------------------------------------------

def test_capture_stdout_catches_what_c_code_prints():
    libc = ctypes.CDLL(None)
    with course.capture_stdout() as out:
        libc.printf(b"i=%d grey=%d\n", 3, 42)
    assert out.lines == ["i=3 grey=42"]
    result, lines = course.printed(lambda v: libc.printf(b"v=%d\n", v) and v, 9)
    assert result == 9 and lines == ["v=9"]


# ---- PTX and SASS ----------------------------------------------------------------------------------------------

SRC = course.cuda_begin + r"""
__device__ float weigh(unsigned char v, float w) { return w * v; }
__global__ void k(unsigned char* x, unsigned char* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.2989f*x[i] + 0.5870f*x[i+n] + weigh(x[i+2*n], 0.1140f);
}
torch::Tensor f(torch::Tensor x) { auto out = torch::empty_like(x); return out; }
"""


def test_ptx_compiles_only_the_kernels():
    from course.sass import kernel_source
    text = kernel_source(SRC)
    assert "__global__ void k(" in text and "__device__ float weigh" in text and "torch::Tensor" not in text


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="no nvcc")
def test_ptx_shows_nvcc_fusing_multiply_adds_and_fmad_false_not():
    fused = course.float_ops(course.ptx(SRC))
    assert fused.get("fma.rn.f32", 0) >= 1
    assert "fma.rn.f32" not in course.float_ops(course.ptx(SRC, fmad=False))
    assert all("f32" in line for line in course.arithmetic(course.ptx(SRC)))


def grey_kernel(expression):
    """A grayscale kernel whose pixel is the given C expression of x[i], x[i+n], x[i+2*n]."""
    return course.cuda_begin + (r"""
__global__ void k(unsigned char* x, unsigned char* out, int n) {
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n) out[i] = %s;
}
""" % expression)


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="no nvcc")
def test_cpu_mode_warns_when_a_gpu_would_fuse_what_cpu_mode_does_not(monkeypatch, capsys):
    from course.sass import contracted_fmas, warn_cpu_fma
    plain = grey_kernel("0.2989f*x[i] + 0.5870f*x[i+n] + 0.1140f*x[i+2*n]")
    exact = grey_kernel("__fadd_rn(__fadd_rn(__fmul_rn(0.2989f, x[i]), __fmul_rn(0.5870f, x[i+n])), "
                        "__fmul_rn(0.1140f, x[i+2*n]))")
    written = grey_kernel("__fmaf_rn(0.1140f, x[i+2*n], __fmaf_rn(0.2989f, x[i], 0.5870f*x[i+n]))")  # CPU mode fuses it too
    doubles = grey_kernel("0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]")
    assert [contracted_fmas(s) for s in (plain, exact, written, doubles)] == [2, 0, 0, 2]
    monkeypatch.setenv("COURSE_CPU_MODE", "1")
    warn_cpu_fma(plain)
    warned = capsys.readouterr().out
    assert warned.startswith("Warning: on a GPU nvcc fuses 2 ") and warned.count("\n") == 1 and "__fmul_rn" in warned
    warn_cpu_fma(exact)
    assert capsys.readouterr().out.startswith("nvcc fuses none")
    if not torch.cuda.is_available():
        return
    monkeypatch.setenv("COURSE_CPU_MODE", "0")  # on a GPU the bytes seen are the GPU's: nothing to warn of
    warn_cpu_fma(plain)
    assert capsys.readouterr().out == ""

def test_float_ops_reads_sass_opcodes():
    listing = "/*0090*/ FMUL R2, R2, 0.58700001 ;\n/*00a0*/ FFMA R2, R3, 0.29890001, R2 ;\n/*00b0*/ FFMA R0, R0, c[0x0], R2 ;"
    assert course.float_ops(listing) == {"FMUL": 1, "FFMA": 2}


@pytest.mark.skipif(torch.cuda.is_available() and not course.cpu_mode(), reason="CPU mode only")
def test_sass_needs_a_gpu_build():
    with pytest.raises(course.GPUNeeded, match="CPU mode"):
        course.sass_of(object())


# ---- drill 1: rounding edges and the exact judge ------------------------------------------------------------

def test_every_edge_colour_tips_some_order_of_roundings_and_random_colours_seldom_do():
    x = rounding.rounding_edges()
    assert x.shape == (3, 1, 317) and len(set(rounding.EDGE_COLOURS)) == 317
    ref = rounding.rgb2grey(x).to(torch.int16)
    tipped = torch.zeros(317, dtype=torch.bool)
    for v in rounding._candidates(x).values():
        tipped |= (v != ref).reshape(-1)
    assert bool(tipped.all())
    g = torch.Generator().manual_seed(0)
    sample = torch.randint(0, 256, (3, 1, 200_000), dtype=torch.uint8, generator=g)
    ref = rounding.rgb2grey(sample).to(torch.int16)
    packed = (sample[0].long() << 16 | sample[1].long() << 8 | sample[2].long()).reshape(-1)
    for way, v in rounding._candidates(sample).items():
        if not way.startswith("double_fma"):  # these tip colours of their own too; the edges tell them apart anyway
            for colour in packed[(v != ref).reshape(-1)].tolist():
                assert colour in rounding.EDGE_COLOURS
    edges = {k: int((v != rounding.rgb2grey(x).to(torch.int16)).sum()) for k, v in rounding._candidates(x).items()}
    assert edges["double_fma_nvcc"] == 202 and edges["double_fma_in_order"] == 176 and edges["double"] == 302


@pytest.mark.parametrize("way,phrase", [("fma_nvcc", "nvcc's fused multiply-adds"), ("double", "double arithmetic"),
                                        ("double_fma_nvcc", "double arithmetic"),
                                        ("order_rb_g", "another order")])
def test_the_exact_judge_names_the_order_of_roundings_the_pixels_show(way, phrase):
    x = rounding.rounding_edges()
    case = Case("the edges", (x,))
    rounding.judge_identical(rounding.rgb2grey(x), case, "f")
    with pytest.raises(AssertionError, match=phrase):
        rounding.judge_identical(rounding._candidates(x)[way].to(torch.uint8), case, "f")


def test_a_mistake_beyond_rounding_is_judged_as_the_lessons_judge_it():
    x = rounding.rounding_edges()
    with pytest.raises(AssertionError, match="pixels are wrong"):
        rounding.judge_identical((rounding.rgb2grey(x).int() + 5).clamp(0, 255).to(torch.uint8), Case("e", (x,)), "f")


# ---- drill 2: row judges ------------------------------------------------------------------------------------------

def _row_case(h, w, sign=0):
    return Case(f"a {h}x{w} matrix", (rows._matrix(h, w, 1, sign),))


def test_row_max_from_zero_is_named_and_a_right_max_passes():
    case = _row_case(6, 5, sign=-1)
    x = case.args[0]
    rows.judge_row_max(x.amax(1), case, "f")
    with pytest.raises(AssertionError, match="starts at 0"):
        rows.judge_row_max(torch.zeros(6), case, "f")
    with pytest.raises(AssertionError, match="column by column"):
        rows.judge_row_max(x.reshape(-1).view(5, 6).t().amax(1), case, "f")


def test_row_sum_judges_within_the_bound_and_names_a_short_loop_and_unwritten_rows():
    case = _row_case(7, 300)
    x = case.args[0]
    rows.judge_row_sum(x.flip(1).sum(1), case, "f")  # another order of additions: within the bound
    with pytest.raises(AssertionError, match="misses its last value"):
        rows.judge_row_sum(x[:, :-1].sum(1), case, "f")
    out = x.sum(1)
    out[4:] = float("nan")
    with pytest.raises(AssertionError, match="rows 4 to 6 were never written"):
        rows.judge_row_sum(out, case, "f", unwritten=out.isnan())
    rows.judge_row_sum(torch.empty(0), _row_case(0, 3), "f")
    rows.judge_row_max(torch.empty(0), _row_case(0, 3), "f")


# ---- drill 3: the guard left out ------------------------------------------------------------------------------

def _launcher(kernel):
    def rgb2grey_pybk(x):
        c, h, w = x.shape
        n = h * w
        x = x.flatten()
        res = torch.empty(n, dtype=x.dtype)
        course.blk_kernel(kernel, course.cdiv(n, 256), 256, x, res, n)
        return res.view(h, w)
    return rgb2grey_pybk


def no_guard(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx * blockdim + threadidx
    out[i] = 0.2989 * x[i] + 0.5870 * x[i + n] + 0.1140 * x[i + 2 * n]


def guarded(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx * blockdim + threadidx
    if i < n:
        out[i] = 0.2989 * x[i] + 0.5870 * x[i + n] + 0.1140 * x[i + 2 * n]


def third_plane_too_far(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx * blockdim + threadidx
    out[i] = 0.2989 * x[i] + 0.5870 * x[i + n] + 0.1140 * x[i + 3 * n]


def test_the_guard_left_out_must_raise_past_the_end_and_only_there(capsys):
    course.check_guard_left_out(_launcher(no_guard), "whole_blocks")
    course.check_guard_left_out(_launcher(no_guard), "ragged")
    assert capsys.readouterr().out.strip().endswith("ragged passed (IndexError past the end, as it must)")
    with pytest.raises(AssertionError, match="raised no IndexError"):
        course.check_guard_left_out(_launcher(guarded), "ragged")
    with pytest.raises(AssertionError, match="which has a pixel"):
        course.check_guard_left_out(_launcher(third_plane_too_far), "whole_blocks")


# ---- drill 4: the timer ---------------------------------------------------------------------------------------

def time_ms(fn, *args, warmup=3, reps=20):
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(reps):
        course.synchronize()
        start = time.perf_counter()
        fn(*args)
        course.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def forgetful(fn, *args, reps=20):
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def slow_forgetful(fn, *args, reps=20):
    """forgetful on a busy machine: each launch takes a millisecond of its own, 20 ms in all."""
    def slow(*a):
        time.sleep(1e-3)
        fn(*a)
    return forgetful(slow, *args, reps=reps)


def waits_before_only(fn, *args, reps=20):
    times = []
    for _ in range(reps):
        course.synchronize()
        start = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def test_a_timer_must_wait_for_the_work_and_leave_the_first_call_out():
    course.check_timer(time_ms, "waits")
    course.check_timer(time_ms, "warmup")
    for never_waits in (forgetful, slow_forgetful):
        with pytest.raises(AssertionError, match="stopped the clock before the work was done"):
            course.check_timer(never_waits, "waits")
    with pytest.raises(AssertionError, match="waited for, but not inside the clock"):
        course.check_timer(waits_before_only, "waits")
    with pytest.raises(AssertionError, match="in seconds"):
        course.check_timer(lambda fn: time_ms(fn) / 1e3, "warmup")
    course.synchronize()  # still the course's synchronize, whatever the check wrapped
    assert course.synchronize.__doc__.startswith("Waits until the GPU")


# ---- drill 6: the experiment's launch lines ----------------------------------------------------------------------

def test_the_launch_lines_are_the_calls_of_the_wrapper():
    script = 'm = load_cuda(far_src, cpp_src, ["rgb_to_grayscale"])\ng = m.rgb_to_grayscale(x)  # launch\nt = g.sum()\n'
    assert blocking._launch_lines(script) == [2]
    assert "out[i + 5]" in blocking.overrun_source(5) and "if (i < n)" not in blocking.overrun_source(guard=False)


def test_overrun_source_starts_from_the_L3_lessons_solution():
    from course.topics.grayscale import CUDA_SRC
    nb = json.loads((ROOT / "source" / "grayscale" / "04_L3_cuda.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "__global__" in "".join(c["source"]))
    solution = "".join(ln for ln in cell.splitlines(keepends=True) if "// BEGIN SOLUTION" not in ln and "// END SOLUTION" not in ln)
    assert 'cuda_src = cuda_begin + r"""' + CUDA_SRC[len(course.cuda_begin):] + '"""' in solution
    assert blocking.overrun_source() == CUDA_SRC


def test_a_script_that_catches_its_error_is_told_so():
    script = ('import torch\nfrom course import load_cuda, device\nmodule = load_cuda(far_src, cpp_src, ["rgb_to_grayscale"])\n'
              'try:\n    module.rgb_to_grayscale(torch.zeros(3, 1, 5, dtype=torch.uint8, device=device())).sum().item()\n'
              'except RuntimeError:\n    pass\n')
    with pytest.raises(AssertionError, match="ran to the end without an error"):
        course.check_launch_blocking(script)


# ---- drill 7: printed lines ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("lines,phrase", [
    ([f"i={i} grey=%d" for i in range(6)], "i = 5 through"),
    ([], "nothing at all"),
    (["hello"], "no line of the form"),
    ([f"i={i} grey=3.5" for i in range(5)], "a whole number"),
])
def test_printed_lines_are_judged_on_indices_and_values(lines, phrase):
    img = course.photo()
    grey = course.rgb2grey(img).reshape(-1)
    lines = [ln.replace("%d", str(int(grey[int(ln[2])]))) if "%d" in ln else ln for ln in lines]
    with pytest.raises(AssertionError, match=phrase):
        printf.judge_lines(lines, img, "the photo")


def test_right_lines_in_any_order_pass_and_lines_past_a_small_image_do_not():
    img = course.photo()
    grey = course.rgb2grey(img).reshape(-1)
    printf.judge_lines([f"i = {i}, grey = {int(grey[i])}" for i in (3, 1, 0, 4, 2)], img, "the photo")
    small = img[:, :1, :3].contiguous()
    g = course.rgb2grey(small).reshape(-1)
    with pytest.raises(AssertionError, match="threads past the last pixel"):
        printf.judge_lines([f"i={i} grey={int(g[i]) if i < 3 else 0}" for i in range(5)], small, "a 1x3 image")


# ---- drill 8: the plan's examples ----------------------------------------------------------------------------------

def test_a_plan_needs_two_examples_of_different_shapes_that_agree():
    a, b = torch.arange(6.).view(2, 3), torch.arange(4.).view(4, 1)
    plan.judge_examples([((a,), a * 2, a * 2), ((b,), b * 2, b * 2)], "f")
    with pytest.raises(AssertionError, match="at least two"):
        plan.judge_examples([((a,), a, a)], "f")
    with pytest.raises(AssertionError, match="same shapes"):
        plan.judge_examples([((a,), a, a), ((a + 1,), a, a)], "f")
    with pytest.raises(AssertionError, match="differ on 1 of"):
        plan.judge_examples([((a,), a, a), ((b,), b, b.clone().index_fill_(0, torch.tensor([3]), 9.))], "f")


# ---- the course's names -------------------------------------------------------------------------------------------

def test_the_drills_names_are_functions_not_the_modules_that_hold_them():
    import course.capture  # noqa: F401 (a submodule's import binds its name in the package)
    import course.sass  # noqa: F401
    for name in ("capture_stdout", "printed", "ptx", "sass_of", "run_in_child", "check_grey_identical_cuda",
                 "check_row_sum", "check_guard_left_out", "check_timer", "check_launch_blocking", "check_printf_cuda",
                 "check_plan_l0", "check_grey_threads_cuda", "rounding_edges", "overrun_source", "AsyncWork"):
        assert callable(getattr(course, name)) and not isinstance(getattr(course, name), type(course)), name

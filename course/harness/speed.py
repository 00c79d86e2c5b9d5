"""Speed as a graded test: a student's kernel timed against the course's own, in the check's child process.

The rule, as docs/grading.md and the lessons state it:
- Only a kernel that passed the exercise's checks is timed: every input case but the hidden one, and every check
  mode (memory, race, integrity); a check not yet passed in this process runs first (passed() records each pass).
- What is timed is device code the course launches (harness/record.py, harness/replay.py): the student's function
  runs WARMUP + MIN_RUNS times in a sandboxed child, which records each call's launches; the judge maps them to a
  plan (or refuses one it cannot time); the timing process, where no student host code runs, launches the plan's
  kernels itself (a GPU: the module's device code through the driver API; Triton: the kernels defined from the
  checked source). The course's reference is recorded there and replayed the same way.
- Each contender (yours, the course's reference kernel, and baselines that are reported but never graded, like
  cuBLAS, called directly) is called WARMUP times untimed, then the contenders are timed in turn, in a fresh random
  order each round, in one process on one GPU. Every call gets fresh random inputs from a seed drawn there, the
  output's memory holds a sentinel before the call (unwritten elements show), L2 is flushed (a buffer twice its size
  is written) before each call, then the GPU is held busy for HOLD_MS (so that what is timed is the GPU's work, not
  the host's time to queue it), CUDA events on the current stream time the call, the output is copied right after
  the end event on that stream, and that copy is checked against the exact answer. One wrong output: no points, with
  the message the exercise's checks give.
- Rounds go on until both medians have settled (at least MIN_RUNS runs each, and the median of all runs within
  SETTLED of the median without the last WINDOW), or MAX_RUNS, or BUDGET_S seconds of timing; a kernel already
  ZERO times slower than the reference after MIN_RUNS runs stops early.
- Points: the ratio r = your median / the reference's median. Full marks for r <= FULL (1.2), none for r >= ZERO
  (10), and in between the fraction log(ZERO / r) / log(ZERO / FULL): continuous at both ends (so 1% of noise
  never moves a score by more than about 0.5% of the points), and each doubling of the time costs the same share.
  CS149's rule (full at 1.2x, 7 x T_ref / T in between, zero at 10x) drops from 100% to 83% just past 1.2x and
  from 12% to 0 at 10x.
- Timings run one at a time per GPU: a lock file per GPU under the build folder, held by the child only while
  it times (course grade's workers share a GPU). The GPU's name and clocks are recorded with the figures.
- CPU mode measures nothing: the test says speed is measured on a GPU at grading time and awards nothing, never
  failing a notebook. For tests only, COURSE_SPEED_CPU=1 runs the same protocol there with a wall clock and small
  inputs (no L2 to flush, no streams), so the attack corpus (tests/speed/) can show every attack gets nothing.
"""
import contextlib
import dataclasses
import fcntl
import io
import math
import os
import random
import secrets
import socket
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..device import cpu_mode, nvidia_smi, require_gpu
from ..toolchain import build_root
from ..toolchain.toolkit import kept
from .exercise import Case, exercise_named, fill_byte, unwritten
from .wire import Timed

WARMUP = 3          # untimed calls of each contender first: loading, the first launch, caches
MIN_RUNS = 10       # timed calls of each contender, at least
WINDOW = 5          # the median has settled when dropping the last WINDOW runs moves it by less than SETTLED
SETTLED = 0.01
MAX_RUNS = 100      # timed calls of each contender, at most
BUDGET_S = 20.0     # seconds of timing rounds, at most (then the medians so far count, marked unsettled)
FULL, ZERO = 1.2, 10.0  # full marks at or under FULL times the reference's time, none at or over ZERO times
LOCK_WAIT = 600     # seconds a speed test waits for its GPU while others are timed there
HOLD_MS = 0.5      # GPU: after the flush the device is held busy this long, so the call is queued before the timing
                    # starts (Triton's Python launcher takes 0.07-0.17 ms a call, longer than the flush: the GPU
                    # idled inside the events, and a median moved 13-17% between runs; held, under 1%)
ELSEWHERE_MS = 0.02  # GPU: a call left work on another stream when the device stays busy past its end longer than
                    # this plus twice its time (medians; an idle device's synchronize and the output's copy take less)
ELSEWHERE_HINT = ("launch on the current stream (`kernel<<<blocks, threads>>>(...)`, or "
                  "at::cuda::getCurrentCUDAStream() as the fourth launch parameter), never on a stream of your own: the "
                  "time must include all the work.")
CPU_SWITCH = "COURSE_SPEED_CPU"  # tests only: run the protocol in CPU mode, with a wall clock
RULE = (f"full points at most {FULL:g}x the course's kernel's time, none at {ZERO:g}x or more, "
        f"log({ZERO:g}/r)/log({ZERO:g}/{FULL:g}) of them in between")
NOT_MEASURED = ("speed is measured on a GPU when your work is graded; in CPU mode this test times nothing "
                "and awards nothing")


@dataclass(frozen=True)
class Speed:
    """An exercise's performance test on one rung: the course's kernel it is timed against, and the timed inputs."""
    reference: Any = field(repr=False)  # the course's own answer, in the rung's form (a CUDA source; a launch function)
    inputs: Callable = None           # (generator, device, small) -> the arguments of one call: fresh random inputs
    agrees: Callable = None           # (output, args) -> True when the output is right (on the device, every call)
    where: Callable = None            # (small) -> how messages name the timed inputs
    baselines: tuple = ()             # (name, "module:function") timed alongside, reported, never graded (cuBLAS)


@dataclass(frozen=True)
class Score:
    """What a speed test returns: the share of its points earned, and what was measured (the cell's record)."""
    fraction: float
    record: dict = field(default_factory=dict)

    def __repr__(self):
        if not self.record.get("measured"):
            return "no points here: speed is measured on a GPU at grading time"
        return f"{self.fraction:.0%} of this test's points ({self.record['ratio']:.2f}x the course's kernel's time)"


def fraction(ratio):
    """The share of a speed test's points for a time ratio (yours / the reference's): the stated rule."""
    if ratio <= FULL:
        return 1.0
    if ratio >= ZERO:
        return 0.0
    return math.log(ZERO / ratio) / math.log(ZERO / FULL)


# ---- only a kernel that passed the exercise's checks is timed ---------------------------------------------------

_passed = {}  # (topic, exercise, built file) -> the cases its checks passed in this process


def passed(exercise, path, case):
    """Records that an exercise's answer (its built file) passed one check: the speed test's gate reads it."""
    _passed.setdefault((exercise.topic, exercise.name, str(path)), set()).add(case)


def required(exercise, rung):
    """The checks an answer must pass before it is timed: the rung's input cases but the hidden one, and its modes."""
    cases = [c for c in exercise.case_names[rung.sizes] if c != "random"]
    return cases + [m for m in rung.modes if m != "speed" and m in exercise.case_names.get("modes", rung.modes)]


def _gate(exercise, rung, answer, path, func, options):
    done = _passed.get((exercise.topic, exercise.name, str(path)), set())
    for case in required(exercise, rung):
        if case in done:
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                rung.check(exercise, answer, case, None, **options)
        except AssertionError as e:
            raise AssertionError(f"{func}: the speed test times only a kernel that passes the exercise's checks, and "
                                 f"yours fails the {case!r} check:\n{e}") from None


# ---- the judge's side ------------------------------------------------------------------------------------------

def check_speed(exercise, rung, answer, **options):
    """Times an answer against the course's kernel for the exercise on a rung (its Speed): prints the figures and
    returns a Score; raises AssertionError when it fails a check first or gives a wrong output while timed."""
    spec = exercise.speed.get(rung.name)
    if spec is None:
        raise ValueError(f"{exercise.name} declares no speed test for the {rung.name} rung")
    cpu = cpu_mode()
    if cpu and not os.environ.get(CPU_SWITCH):
        print(f"{exercise.bindings[rung.name].func}: {NOT_MEASURED}.")
        return Score(0.0, {"measured": False, "why": NOT_MEASURED})
    if not cpu:
        require_gpu(f"speed test of {exercise.bindings[rung.name].func}")
    path, func, _ = rung.locate(exercise, answer)
    _gate(exercise, rung, answer, path, func, options)
    record = timed(exercise, rung, answer)
    print(summary(func, record))
    return Score(record["fraction"], record)


def _inputs(exercise, spec, small, calls=2):
    """Fresh random inputs for calls of the function (on the CPU), and each call's fill: (bytes, byte)."""
    nbytes = torch.empty(0, dtype=exercise.out_dtype).element_size()
    inputs, fills = [], []
    for _ in range(calls):
        args = spec.inputs(torch.Generator().manual_seed(secrets.randbits(62)), "cpu", small)
        inputs.append(args)
        fills.append((exercise.out_numel(Case("", args)) * nbytes, fill_byte(exercise.out_dtype)))
    return inputs, fills


def recorded(exercise, rung, path, func, loader):
    """The replay's plan of an answer: its function run on two inputs in a sandboxed child, its launches recorded
    there (harness/record.py) and mapped by the judge (harness/replay.py); AssertionError when it cannot be timed."""
    from .children import memory_module, run_and_judge
    from .wire import Job
    cpu = cpu_mode()
    inputs, fills = _inputs(exercise, exercise.speed[rung.name], cpu)
    job = Job(module=str(path), func=func, inputs=inputs, fills=fills, mode="record", cpu=cpu,
              memory_module=memory_module() if cpu else None, exercise=(exercise.topic, exercise.name),
              loader=loader, verdict="course.harness.replay:verdict", task="record", repeat=WARMUP + MIN_RUNS)
    return run_and_judge(job)["record"]


def timed(exercise, rung, answer, in_process=False):
    """What the speed test measures of an answer, without the checks it must pass first (benchmarks/speed.py times
    the lesson's kernels so): the verdict's record; AssertionError for a wrong output. in_process: the course's
    kernel is also timed called as a function (its host code too, as before the replay), as the baseline "in-process"."""
    from .children import TIMEOUT, memory_module, run_and_judge
    from .wire import Job
    spec, cpu = exercise.speed[rung.name], cpu_mode()
    path, func, loader = rung.locate(exercise, answer)
    ref_path, ref_func, ref_loader = rung.locate(exercise, spec.reference)
    plan = recorded(exercise, rung, path, func, loader)
    contenders = [{"name": "reference", "module": ref_path, "func": ref_func, "loader": ref_loader},
                  *({"name": name, "call": call} for name, call in spec.baselines),
                  *([{"name": "in-process", "module": ref_path, "func": ref_func, "loader": ref_loader,
                      "direct": True}] if in_process else []),
                  {"name": "yours", "module": str(path), "func": func, "loader": loader, "plan": plan}]
    job = Job(module=str(path), func=func, inputs=[], fills=[], mode="speed", cpu=cpu,
              memory_module=memory_module() if cpu else None, exercise=(exercise.topic, exercise.name),
              loader=loader, verdict="course.harness.speed:verdict", task="speed",
              speed={"rung": rung.name, "contenders": contenders})
    return run_and_judge(job, timeout=TIMEOUT + LOCK_WAIT)["record"]


def summary(func, r):
    """The line a speed test prints: your time, the reference's, the ratio, the points' share, the GPU."""
    others = "".join(f"; {name} {ms:.4g} ms" for name, ms in r["baselines"].items())
    gpu = r.get("gpu", {})
    clock = f", SM clock {gpu['clocks.sm']} MHz" if gpu.get("clocks.sm") else ""
    settled = "" if r["settled"] else ", not settled within the time allowed"
    return (f"{func}: {r['ms']:.4g} ms for {r['where']} (median of {r['runs']} runs, fresh random inputs each"
            f"{settled}); the course's kernel {r['reference_ms']:.4g} ms{others}. Yours takes {r['ratio']:.2f}x its "
            f"time: {r['fraction']:.0%} of this test's points ({RULE}). Timed with {r['clock']} on "
            f"{gpu.get('name', 'this machine')}{clock}.")


def _median(times):
    return statistics.median(times) if times else float("nan")


def verdict(job, result):
    """Judges a speed test's runs (judge.judge, where the student's module never ran): the figures and the share of
    the points as a record, or AssertionError for a wrong output."""
    from .children import KernelFailed, crash_hint
    from .rungs import RUNGS
    exercise, func, words = exercise_named(job.exercise), job.func, RUNGS[job.speed["rung"]].words
    if result.error:
        raise KernelFailed(f"running your function raised an error during the speed test:\n  {result.error}\n"
                           f"Hint: {crash_hint(result.error, words)}.")
    if result.wrong:
        w = result.wrong
        if w["name"] != "yours":
            raise RuntimeError(f"the course's {w['name']} gave a wrong answer in the speed test (the course's "
                               "fault, not yours)")
        if w.get("elsewhere"):
            raise AssertionError(
                f"{func}: after each call the GPU stayed busy for {w['elsewhere'][0]:.3f} ms (median) once the current "
                f"stream had finished the call's work ({w['elsewhere'][1]:.3f} ms): your function returned while its "
                "kernel was still running elsewhere, on a stream of its own.\nHint: " + ELSEWHERE_HINT)
        said = (f"{func}: the speed test checks the output of every call, each on fresh random inputs, and call "
                f"{w['call']} ({w['where']}) was wrong")
        if w.get("early"):
            raise AssertionError(
                f"{said} when the work your function queued on the current stream had ended, and right only later: "
                "your function returned while its kernel was still running elsewhere.\nHint: " + ELSEWHERE_HINT)
        case = Case(w["where"], w["args"], words=words)
        try:
            exercise.judge(w["value"], case, func, unwritten(w["value"]))
        except AssertionError as e:
            raise AssertionError(f"{said}:\n{e}") from None
        raise AssertionError(f"{said}.\nHint: every call must compute its own inputs' answer, whatever came before.")
    times = result.times
    yours, ref = _median(times["yours"]), _median(times["reference"])
    ratio = yours / ref
    return {"measured": True, "ms": yours, "reference_ms": ref, "ratio": ratio, "fraction": fraction(ratio),
            "runs": len(times["yours"]), "settled": result.settled, "stopped": result.stopped,
            "baselines": {k: _median(v) for k, v in times.items() if k not in ("yours", "reference")},
            "quartiles": statistics.quantiles(times["yours"], n=4) if len(times["yours"]) > 1 else [],
            "where": result.where, "clock": result.clock, "gpu": result.gpu, "lock_wait_s": result.lock_wait_s,
            "rule": RULE}


# ---- the child's side: the timing itself ------------------------------------------------------------------------

class _Wrong(Exception):
    """A contender's output was wrong: what the judge needs to say how."""


@contextlib.contextmanager
def gpu_lock(key, wait=LOCK_WAIT):
    """Holds the lock of one GPU (a file under the build folder) so that timings there run one at a time; yields the
    seconds waited for it."""
    folder = kept(build_root(), "locks")  # in a sandbox: the grader's folder (course/harness/forkserver.py)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"speed-{key}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    start = time.monotonic()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start > wait:
                    raise RuntimeError(f"another speed test held this GPU for over {wait} s") from None
                time.sleep(0.05)
        yield time.monotonic() - start
    finally:
        os.close(fd)  # closing releases the lock


def gpu_facts():
    """The GPU a test runs on: its name and id from torch, its clocks (MHz), temperature and power from nvidia-smi."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    facts = {"name": props.name, "uuid": str(getattr(props, "uuid", "")), "torch": str(torch.__version__),  # a str subclass, which the wire refuses
             "l2_bytes": getattr(props, "L2_cache_size", None)}
    fields = ("clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw", "driver_version")
    if facts["uuid"]:
        uuid = facts["uuid"] if facts["uuid"].startswith("GPU-") else f"GPU-{facts['uuid']}"
        rows = nvidia_smi(*fields, units=False, timeout=20, gpu=uuid) or []
        if len(rows) == 1 and len(rows[0]) == len(fields):
            facts.update(zip(fields, rows[0]))
    return facts


def _load(contender, job):
    from .tasks import named as imported
    from ..toolchain.load import import_compiled
    if contender.get("call"):
        return imported(contender["call"])
    if contender.get("loader"):
        return imported(contender["loader"])(dataclasses.replace(job, module=contender["module"],
                                                                  func=contender["func"]))
    return getattr(import_compiled(contender["module"]), contender["func"])


def _replay(contender, job, exercise, spec):
    """A contender as the timing process launches it (harness/replay.py): the student's from the judge's plan, the
    course's reference recorded here first (its host code is the course's own)."""
    from . import record, replay
    from .wire import Recorded
    triton = bool(contender.get("loader"))
    plan = contender.get("plan")
    if plan is None:
        fn = _load(contender, job)
        inputs, fills = _inputs(exercise, spec, job.cpu)
        calls = record.recorded(fn, contender["module"], inputs, fills, job.cpu, triton)
        plan = replay.plan(Recorded(calls=calls), triton, job.cpu)
    return replay.Replay(plan, contender["module"], job.cpu, triton)


def _settled(times):
    if len(times) < max(MIN_RUNS, WINDOW + 1):
        return False
    now = statistics.median(times)
    return abs(now - statistics.median(times[:-WINDOW])) <= SETTLED * now


def _cycles(ms, event, sleep):
    """The GPU clock cycles torch.cuda._sleep spins for ms milliseconds (measured: the clock is the SM's)."""
    sleep(1000)
    start, end = event(enable_timing=True), event(enable_timing=True)
    start.record()
    sleep(1_000_000)
    end.record()
    end.synchronize()
    return int(ms * 1_000_000 / start.elapsed_time(end))


def measure(job_path, result_path):
    """The timing process's work (task "speed", tasks.py): warms up and times every contender in turn, each call checked,
    the student's replayed from the judge's plan; saves Timed."""
    from . import wire
    from .child import prefill
    from .wire import Job
    job = wire.read(job_path, Job)
    result = Timed()
    gpu = not job.cpu
    event, perf, synchronize, sleep = (torch.cuda.Event, time.perf_counter, torch.cuda.synchronize,
                                       torch.cuda._sleep)  # bound before any answer loads
    try:
        exercise = exercise_named(job.exercise)
        spec = exercise.speed[job.speed["rung"]]
        dev, small = ("cpu", True) if job.cpu else ("cuda", False)
        result.where, result.clock = spec.where(small), "CUDA events" if gpu else "a wall clock (CPU mode, tests only)"
        contenders = job.speed["contenders"]  # the student's last: the course's kernels load first
        if job.cpu:  # new tensors hold the fill byte, as in every CPU-mode check (memory.cpp)
            from ..toolchain.load import import_compiled
            import_compiled(job.memory_module).install("padded", fill_byte(exercise.out_dtype))
        fns = {c["name"]: _load(c, job) if c.get("call") or c.get("direct") else _replay(c, job, exercise, spec)
               for c in contenders}
        fills = {name: fill_byte(exercise.out_dtype) for name in fns}  # a replay's new memory (replay.py)
        gen = torch.Generator(device=dev)
        nbytes = torch.empty(0, dtype=exercise.out_dtype).element_size()
        flush, hold = None, 0
        if gpu:
            l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 0
            flush = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device=dev)
            hold = _cycles(HOLD_MS, event, sleep)
        calls = {name: 0 for name in fns}
        after = {name: [] for name in fns}  # GPU: ms the device stayed busy after the current stream ended a call

        def one(name):
            """One call of a contender on fresh inputs: its milliseconds; raises _Wrong for a wrong output."""
            calls[name] += 1
            gen.manual_seed(secrets.randbits(62))
            args = spec.inputs(gen, dev, small)
            fn = fns[name]
            if gpu:
                prefill(exercise.out_numel(Case("", args)) * nbytes, fill_byte(exercise.out_dtype), dev)
            call = fn.prepare(args, fills[name]) if hasattr(fn, "prepare") else (lambda: fn(*args))
            if gpu:
                flush.zero_()
                sleep(hold)
                start, end = event(enable_timing=True), event(enable_timing=True)
                start.record()
                y = call()
                end.record()
                snap = y.clone() if isinstance(y, torch.Tensor) else y  # on the same stream, right after the end
                end.synchronize()  # the current stream has done the call's work; other streams may not have
                t = perf()
                synchronize()  # every stream: work left running elsewhere ends before the final output is read
                after[name].append((perf() - t) * 1e3)
                ms = start.elapsed_time(end)
            else:
                t = perf()
                y = call()
                ms = (perf() - t) * 1e3
                snap = y
            if not (isinstance(snap, torch.Tensor) and spec.agrees(snap, args)):
                early = isinstance(y, torch.Tensor) and y is not snap and spec.agrees(y, args)
                raise _Wrong({"name": name, "call": calls[name], "where": result.where, "early": early,
                              "args": tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args),
                              "value": snap.cpu() if isinstance(snap, torch.Tensor) else snap})
            return ms

        for name in fns:
            for k in range(WARMUP):
                try:
                    one(name)
                except _Wrong:
                    if k or fills[name] == 0 or not hasattr(fns[name], "prepare"):
                        raise
                    fills[name] = 0  # the kernels need zeros where the function's host code wrote them (torch::zeros)
                    one(name)
        result.times = {name: [] for name in fns}
        key = (getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None) if gpu else None) \
            or f"{'gpu' if gpu else 'cpu'}-{socket.gethostname()}"  # without an id, one lock for the host's GPUs
        shuffle = random.Random(secrets.randbits(64))
        with gpu_lock(str(key)) as waited:
            result.lock_wait_s = waited
            begun = perf()
            while True:
                order = list(fns)
                shuffle.shuffle(order)
                for name in order:
                    result.times[name].append(one(name))
                yours, ref = result.times["yours"], result.times["reference"]
                runs = len(yours)
                if _settled(yours) and _settled(ref):
                    result.settled = True
                    break
                if runs >= MIN_RUNS and statistics.median(yours) >= ZERO * statistics.median(ref):
                    result.stopped = f"{ZERO:g}x the course's kernel's time or more after {runs} runs"
                    break
                if runs >= MAX_RUNS or (runs >= MIN_RUNS and perf() - begun > BUDGET_S):
                    result.stopped = f"{runs} runs in {perf() - begun:.1f} s"
                    break
            if gpu:
                result.gpu = gpu_facts()
        if gpu and _median(after["yours"]) > 2 * _median(result.times["yours"]) + ELSEWHERE_MS:
            raise _Wrong({"name": "yours", "elsewhere": (_median(after["yours"]), _median(result.times["yours"]))})
    except _Wrong as wrong:
        result.wrong = wrong.args[0]
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}".strip()
    wire.write(result, result_path)

"""The CUDA rung's runner: each check runs the student's compiled function in a child process and judges what comes back.

The child (child.py) only runs: forked from a warm process (forkserver.py), or started under
compute-sanitizer for the memory and race checks. A crash, an illegal memory access or a hang fails
that check alone, with what happened and the likely cause. The verdict is computed here, from the
installed package, never in the process that ran the student's module.
"""
import dataclasses
from dataclasses import dataclass
import hashlib
import json
import os
import re
import signal
import stat
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import torch

from ..toolchain import CompileError, build_name, build_root, built, module_path
from ..toolchain.load import sources_of
from ..toolchain.toolkit import cuda_tool, quiet_cpp_extension
from ..device import GraderFault, cpu_mode, require_gpu
from ..processes import run_in_session
from . import integrity, spare, trace, wire
from .child import Job, Result, unreadable
from .evidence import guard_hint
from .origin import cuda_facts, with_facts
from .rungs import CUDA
from .exercise import (Case, Exercise, at_element, element_of, fill_byte, order_hint, require_case, same, unwritten,
                       with_hint)

TIMEOUT = 60  # seconds for one check's child process: the largest case takes well under 1 s to run
BUILD_TIMEOUT = 1800  # seconds for building a check's cuda_src: a cold CPU-mode build takes about a minute
PROFILER_IMPORTS = ("torch._dynamo",)  # what torch.profiler's first use on a GPU imports (2.5 s): once, in the server
SANITIZER_EXIT = 86  # compute-sanitizer's exit status when it found errors
MODES = CUDA.modes

_hung = set()  # compiled modules that hung in this process: later checks fail at once
_server, _server_lock = None, threading.Lock()  # the warm server every child is forked from


@dataclass(frozen=True)
class Binding:
    """What the CUDA rung builds and calls for an exercise: the C++ function the module exports, and its declaration."""
    func: str
    cpp_src: str  # as the lesson gives it, byte for byte


def binding(exercise):
    """The CUDA Binding an exercise declares."""
    return exercise.bindings[CUDA.name]


class KernelFailed(AssertionError):
    """The kernel crashed, hung or raised in its child process."""


class OutOfBounds(KernelFailed):
    """The memory check caught a read or write outside a tensor."""


class Raced(KernelFailed):
    """The race check caught threads of a block using shared memory without a barrier between them."""


# glibc's words when a stray write has overwritten its bookkeeping between heap blocks (a write through a
# pointer into the heap: the C++ wrapper's, or in CPU mode a kernel's; tensors have mappings of their own)
HEAP_CORRUPTED = re.compile(r"free\(\): invalid|malloc\(\)|corrupted (size|double-linked)|double free or corruption|"
                            r"munmap_chunk\(\)|malloc_consolidate")


def crash_hint(text, words=None):
    """The likely cause of a child's error or crash, from its words; words: the rung's (rungs.WORDS_KEYS), whose
    "crashes" add the rung's own (pattern, hint) pairs."""
    if ("illegal memory access" in text or "address space" in text or "out of bounds" in text.lower() or "SIGSEGV" in text
            or "SIGBUS" in text or HEAP_CORRUPTED.search(text)):
        return ("a thread read or wrote outside a tensor (or the C++ wrapper used a bad pointer): check the "
                "guard (`if (i < n)`), every offset you add, and every pointer you index")
    if "out of memory" in text or "can't allocate memory" in text or "bad_alloc" in text:
        return "the function asked for more memory than there is: check the sizes you allocate"
    if "must be a CUDA tensor" in text or "must be contiguous" in text:
        return "the function's input checks rejected the input the check gave it"
    if "invalid configuration" in text or "invalid argument" in text:
        return ("the launch asked for an impossible grid: threads per block must be 1 to 1024 and every grid "
                "dimension at least 1 (compute blocks with cdiv, which rounds up; plain division gives 0 "
                "blocks for fewer elements than a block; for an empty input, return before the launch)")
    words = words or CUDA.words
    for pattern, hint in words["crashes"]:
        found = re.search(pattern, text)
        if found:
            return hint.format(*found.groups())
    return f"read the error above: it comes from {words['code']}"


def memory_module():
    """The path of course/harness/memory.cpp built as a module (once per machine): CPU mode's padded and guarded memory."""
    source = Path(__file__).with_name("memory.cpp")
    digest = hashlib.sha256((source.read_text() + torch.__version__).encode()).hexdigest()[:12]
    name = f"course_cpu_memory_{digest}"
    build_dir = build_root() / name
    built = list(build_dir.glob(f"{name}*.so"))
    if built:
        return str(built[0])
    build_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = quiet_cpp_extension().load(name=name, sources=[str(source)], build_directory=str(build_dir),
                                            extra_cflags=["-O1"], verbose=False)
    return module.__file__


def _tail(path, limit=4000):
    """The last limit bytes of a child's log, as text; "" when it is not a plain file (a child may have replaced it
    with a pipe, whose reader would wait forever, or a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read().decode(errors="replace")


def _sanitizer_lines(path, limit=200):
    """The first lines compute-sanitizer wrote into a child's log (its own start with =========): its report, which a
    long crash report after it (a C++ abort's stack) would push out of the log's tail."""
    lines = [line for line in _tail(path, 64 << 20).splitlines() if line.startswith("=========")]
    return "\n".join(lines[:limit] + lines[-3:] if len(lines) > limit else lines)


def _child_env():
    return dict(os.environ, PYTHONWARNINGS="ignore")


def kept_children():
    """Whether a check's calls go to a kept spare (spare.py): on a GPU, where each new child's CUDA context costs."""
    return not cpu_mode()


def prepare_children(cases=()):
    """Starts, where checks use them (on a GPU), a kept spare and a spare for each sanitized check named in cases
    ahead of the checks (spare.py): `course grade` calls it as a notebook starts, with its test cells' cases."""
    if not kept_children():
        return
    spare.prepare_kept(_child_env())
    for mode in ("memory", "race"):
        under = sanitizer(mode) if mode in cases else None
        if under is not None:
            spare.prepare(*under)


def in_child(task, args, log, timeout, sanitizer=None, env=None, imports=(), answer=None):
    """Runs child.<task>(*args) in a fresh process: forked from the warm server, which imports imports first (a fresh
    interpreter when env is given), or a spare started under sanitizer in env; on a GPU, calls of an answer (the
    file of its module) go to the answer's kept spare (spare.py). Its exit code, None after a timeout."""
    key = trace.key_of(args[0]) if args else ""
    trace.mark(f"{task} asked", key)
    try:
        return _in_child(task, args, log, timeout, sanitizer, env, imports, answer)
    finally:
        trace.mark(f"{task} ended", key)


def _in_child(task, args, log, timeout, sanitizer, env, imports, answer):
    if sanitizer is not None:
        return spare.run_taken(sanitizer, env, task, args, log, timeout)
    if env is None and answer is not None and kept_children():
        return spare.run_kept(task, args, log, timeout, _child_env(), answer)
    if env is None:
        try:
            from .forkserver import Server
            global _server
            with _server_lock:
                if _server is None or not _server.alive():
                    _server = Server(env=_child_env())
                server = _server
            return server.run(task, args, log, timeout, imports)
        except OSError:  # no warm server to be had: a fresh interpreter does the same, slower
            pass
    cmd = [sys.executable, "-m", "course.harness.child", task, *map(str, args)]
    return run_in_session(cmd, env or _child_env(), log, timeout)


def sanitizer(mode):
    """(command prefix, environment) of a child under compute-sanitizer for the memory or race check; None without the tool."""
    tool = cuda_tool("compute-sanitizer")
    if tool is None:
        return None
    which = ["--tool", "memcheck"] if mode == "memory" else ["--tool", "racecheck", "--racecheck-report", "all"]
    prefix = [tool, *which, "--error-exitcode", str(SANITIZER_EXIT), "--print-limit", "4", "--show-backtrace", "no"]
    return prefix, dict(_child_env(), PYTORCH_NO_CUDA_MEMORY_CACHING="1")  # each tensor its own allocation: exact bounds


def _hang(seconds):
    return KernelFailed(f"your function did not finish within {seconds} s and was stopped. Hint: a kernel whose loop "
                        "never ends, or a thread waiting for something that never happens, hangs the GPU.")


def call_in_child(module, func, args, timeout=None, timing=None, loader=None, words=None):
    """Calls func of a module load_cuda built on args in a child process, as a check does: (what it returned, on the
    CPU, and what the process printed). A crash, a memory fault, a hang or an error it raised is raised here as
    KernelFailed with the likely cause; the calling process is untouched. timing=(warmup, reps): cuda_time's median
    milliseconds of the calls there, instead of what the function returned. loader: a rung's "module:function" that
    loads func from the file module names (a Triton launch function's, harness/triton.py); words: its rung's, for hints."""
    timeout = timeout or TIMEOUT
    path = str(module) if loader else module_path(module)
    if path in _hung:
        raise KernelFailed(f"skipped: {func} did not finish in an earlier call and was stopped then; fix the hang "
                           "first (a loop that never ends?).")
    cpu = cpu_mode()
    job = Job(module=path, func=func, inputs=[tuple(a.detach().cpu() if isinstance(a, torch.Tensor) else a
                                                    for a in args)], fills=[(0, 0)], mode="time" if timing else "run",
              cpu=cpu, memory_module=memory_module() if cpu else None, timing=timing, loader=loader)
    with tempfile.TemporaryDirectory(prefix="course-call-") as tmp:
        job_path, result, log = Path(tmp) / "job.pt", Path(tmp) / "result.pt", Path(tmp) / "output.txt"
        wire.write(job, job_path)
        log.touch()
        code = in_child("run", [job_path, result], log, timeout, answer=path)
        output = _tail(log)
        if code is None:
            _hung.add(path)
            raise _hang(timeout)
        if code != 0 or not result.exists():
            raise _crashed(code, output)
        try:
            ran = wire.loads(wire.taken(result), Result)
        except wire.Unreadable as e:
            raise KernelFailed(unreadable(func, e)) from None
    if ran.error:
        raise KernelFailed(f"{func} raised an error:\n  {ran.error}\nHint: {crash_hint(ran.error, words)}.")
    return ran.runs[0].value, output


def run_and_judge(job, timeout=None):
    """Runs a Job's calls in one child process and judges them in another; raises AssertionError with the verdict's
    message, else returns the verdict (its "record": what the judge measured, for a speed test)."""
    timeout = timeout or TIMEOUT
    if job.module in _hung:
        raise KernelFailed("skipped: your function did not finish in an earlier check and was stopped "
                           "then; fix the hang first (a loop that never ends?).")
    sanitized = job.mode in ("memory", "race") and not job.cpu
    # two folders: the child's (its job, its result, its output) and the judge's own, which no child is told of: the
    # judge reads its copy of the job (checked against the digest of what was written), and the result copied out
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp, \
            tempfile.TemporaryDirectory(prefix="course-judge-") as own:
        job_path, result, log = Path(tmp) / "job.pt", Path(tmp) / "result.pt", Path(tmp) / "output.txt"
        wire.write(job, job_path)
        log.touch()
        under = (None, None)
        if sanitized:
            under = sanitizer(job.mode)
            if under is None:
                raise GraderFault(f"the {job.mode} check needs compute-sanitizer from the CUDA toolkit, and it is "
                                  "not on PATH or in $CUDA_HOME/bin here; this is the grader's set-up, not your "
                                  "code: tell your instructor.")
        profiled = PROFILER_IMPORTS if job.mode == "integrity" and not job.cpu else ()
        code = in_child(job.task, [job_path, result], log, timeout * (3 if sanitized else 1), *under, profiled,
                        answer=job.module if job.task == "run" else None)  # a speed test times in a fresh child
        if code is None:
            _hung.add(job.module)
            raise _hang(timeout * (3 if sanitized else 1))
        output = _tail(log)
        if sanitized:
            _sanitizer_verdict(job.mode, code, _sanitizer_lines(log))
            if code == SANITIZER_EXIT and result.exists():
                code = 0  # not a bad access or a race (a refused launch, no memory): the child reports it
        if code != 0 or not result.exists():
            raise _crashed(code, output, sanitized)
        judged, reported = Path(own) / "job.pt", Path(own) / "result.pt"
        digest = wire.write(job, judged)
        try:
            reported.write_bytes(wire.taken(result))
        except wire.Unreadable as e:
            raise AssertionError(unreadable(job.func, e)) from None
        decided, judge_log = Path(own) / "verdict.json", Path(own) / "judge.txt"
        code = in_child("judge", [judged, reported, decided, digest], judge_log, timeout)
        if code != 0 or not decided.exists():
            raise GraderFault(f"the grader could not judge this run (this is the course's fault, not yours): "
                              f"{_tail(judge_log) if judge_log.exists() else code}")
        outcome = json.loads(decided.read_text())
    if not outcome["passed"]:
        if outcome.get("element") is not None:
            raise at_element(outcome["message"], outcome["element"], outcome.get("case", 0))
        raise AssertionError(outcome["message"])
    return outcome


def _crashed(returncode, output, sanitized=False):
    if returncode < 0 or (sanitized and returncode in (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE)):
        # compute-sanitizer passes its child's fatal signal on as an exit code
        what = f"crashed with {signal.Signals(abs(returncode)).name}"
    else:
        what = f"stopped with exit code {returncode}"
    tail = "\n".join(output.strip().splitlines()[-12:])
    corrupted = HEAP_CORRUPTED.search(tail)
    hint = crash_hint(f"{what}: {corrupted.group(0)}" if corrupted else what)
    failed = KernelFailed(f"the process running your function {what}.\n{tail}\nHint: {hint}.")
    failed.output = output  # all of it: a rung may look for more than the tail (triton.py: the faulting line)
    return failed


def _sanitizer_verdict(mode, returncode, output):
    """Raises OutOfBounds or Raced when compute-sanitizer caught a bad access or a shared-memory race."""
    if returncode != SANITIZER_EXIT:
        return
    found = re.search(r"ERROR SUMMARY: (\d+) error", output)
    count = found.group(1) if found else "some"
    if mode == "memory":
        errors = re.findall(r"^=+ (Invalid __\w+__ \w+ of size \d+ bytes?)", output, re.M)
        if errors:
            raise OutOfBounds(f"compute-sanitizer found {count} errors; the first: {errors[0]}")
    else:
        races = re.findall(r"^=+ (?:Error|Warning): (.*(?:[Rr]ace reported|hazard detected).*?)\s*:?\s*$", output, re.M)
        summary = re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)", output)
        if races or (summary and int(summary.group(1)) > 0):
            found = (f"{int(summary.group(1)):,} hazards (and {int(summary.group(2)):,} warnings)" if summary
                     else "hazards")
            raise Raced(f"compute-sanitizer's racecheck found {found}" + (f"; the first: {races[0]}" if races else ""))


def _caller_source(depth=3):
    """The notebook's current cuda_src, if the cell that called the check can see one."""
    frame = sys._getframe(depth)
    while frame is not None:
        src = frame.f_globals.get("cuda_src")
        if isinstance(src, str):
            return src
        frame = frame.f_back
    return None


_failed = {}  # build name -> the compiler's message, so a source that does not compile is tried once


def entry_point(exercise, cuda_src):
    """(function, cpp_src) to build cuda_src with: the exercise's function, or the one function of cuda_src with its parameters.

    So a source written under another name (the lecture's matmul_dyn for the matmul_static exercise) is judged as it is.
    """
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", cuda_src, flags=re.S)
    tensor = r"(?:const\s+)?(?:torch|at)::Tensor\s*&?\s*\w*"
    func, cpp_src = binding(exercise).func, binding(exercise).cpp_src
    wanted = cpp_src.count("Tensor") - 1  # the return type is one
    found = re.findall(rf"(?:torch|at)::Tensor\s+(\w+)\s*\(\s*({tensor}(?:\s*,\s*{tensor})*)\s*\)\s*\{{", code)
    names = [name for name, params in found if params.count("Tensor") == wanted]
    if func in names or len(names) != 1:
        return func, cpp_src
    return names[0], re.sub(rf"\b{func}\b", names[0], cpp_src)


def _build(cuda_src, cpp_src, func):
    """The compiled file of cuda_src: built by load_cuda in a child (forked from the warm server, torch already
    imported), so that the student's module is never imported in this process."""
    found = built(cuda_src, cpp_src, [func])
    if found:
        return found
    with tempfile.TemporaryDirectory(prefix="course-build-") as tmp:
        job, result, log = Path(tmp) / "job.json", Path(tmp) / "result.json", Path(tmp) / "output.txt"
        job.write_text(json.dumps({"cuda_src": cuda_src, "cpp_src": cpp_src, "funcs": [func], "env": dict(os.environ)}))
        log.touch()
        code = in_child("build", [job, result], log, BUILD_TIMEOUT)
        if code != 0 or not result.exists():
            why = f"did not finish within {BUILD_TIMEOUT} s" if code is None else f"stopped (exit status {code})"
            raise CompileError(f"building the module {why}:\n{_tail(log, 3000)}")
        try:  # the build child imported the module (its static initializers ran): what it says is only a report
            out = json.loads(wire.taken(result))
        except (wire.Unreadable, ValueError) as e:
            raise CompileError(f"building the module left no readable report ({e})") from None
    if isinstance(out, dict) and isinstance(out.get("error"), str):
        raise CompileError(out["error"])
    found = built(cuda_src, cpp_src, [func])  # where the course's build puts it, never a path the child names
    if found is None:
        raise CompileError("building the module left no module where load_cuda keeps it")
    return found


def compiled(exercise, answer):
    """(file, function) of the module a check judges: cuda_src (a string) built, or the module load_cuda returned, if current."""
    func = binding(exercise).func
    if isinstance(answer, str):
        func, cpp_src = entry_point(exercise, answer)
        name = build_name(answer, cpp_src, [func])
        try:
            if name in _failed:
                raise CompileError(_failed[name])
            return _build(answer, cpp_src, func), func
        except CompileError as e:
            _failed[name] = str(e)
            raise AssertionError(f"{func}: your cuda_src does not compile, so there is nothing to check yet.\n"
                                 f"{e}") from None
    path = module_path(answer)  # a clear error for anything that is not a module
    if not hasattr(answer, func):
        raise AssertionError(f"the module has no function {func}: name it in funcs=[...] of load_cuda")
    built_from, current = sources_of(answer), _caller_source()
    if built_from is not None and current is not None and built_from[0] != current:
        raise AssertionError(
            f"{func}: `module` was built from an earlier cuda_src than the one the notebook holds now, so "
            "checking it would judge old code. Hint: your last edit did not compile (its error is in the "
            "cell that ran load_cuda), or the load_cuda cell has not run since: fix the error and run it again.")
    return path, func


def _exercise(key):
    import importlib
    topic, name = key
    found = [v for v in vars(importlib.import_module(topic)).values() if isinstance(v, Exercise) and v.name == name]
    return found[0]


def _same_outputs(a, b):
    """True unless two runs returned tensors (one each, or tuples of them) whose bits differ."""
    pairs = zip(a, b) if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) else [(a, b)]
    return all(same(x, y) for x, y in pairs if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor))


def verdict(job, result, rung=CUDA):
    """Judges a child's Result against the job's exercise; raises AssertionError saying what is wrong (run by child.judge).
    rung: whose integrity rule, and the words its messages and the exercise's hints speak."""
    words = rung.words
    exercise, func, cpu = _exercise(job.exercise), job.func, job.cpu
    if result.error:
        text = result.error
        if job.mode == "memory" and cpu and "illegal memory access" in text:
            raise AssertionError(f"{func}: the memory check found out-of-bounds accesses on the "
                                 f"{exercise.probed_words('memory')} sizes: {text.splitlines()[-1]}.\nHint: {job.memory_hint or exercise.hints['memory']}")
        raise KernelFailed(f"running your function raised an error:\n  {text}\nHint: {crash_hint(text, words)}.")
    want = "cpu" if cpu else "cuda"
    own = None if cpu or job.mode != "integrity" else rung.own_kernels(job.module)
    evidence = None
    if job.mode == "integrity" and job.loader is None:  # a compiled module: its objects' symbols, read here (nm)
        evidence = integrity.object_evidence(job.module)
        if evidence is None:
            raise AssertionError(f"{func}: the integrity check could not read the object files your module was "
                                 "linked from, so it cannot tell what your wrapper calls.\nHint: build the module "
                                 "again with load_cuda (run the load_cuda cell), then run this check.")
    for k, (where, args, run) in enumerate(zip(job.wheres, job.inputs, result.runs)):
        if run.input_changed:
            raise AssertionError(f"{func} changed its input for {where}. "
                                 "Hint: the kernel should only write into the output.")
        if run.device is not None:  # it returned tensors: one, or several in a tuple
            if any(not d.startswith(want) for d in run.device.split(",")):
                raise AssertionError(f"{func} returned a tensor on {run.device} for {where}; "
                                     f"expected it on {want}. Hint: {words['allocate']}.")
            if not run.contiguous:
                raise AssertionError(f"{func} returned a non-contiguous tensor for {where}.")
        if job.mode == "integrity":
            integrity.judge(func, where, run, own, job.needs_shared, exercise.hints.get("computes", "every output element"),
                            words, evidence)
        if job.mode == "race" and not _same_outputs(run.value, run.again):
            raise AssertionError(f"{func}: the race check {RACE_SEEN} for {where}, the "
                                 "threads of each block running in another order each time.\n"
                                 f"Hint: {exercise.hints['race']}")
        # Under compute-sanitizer every tensor is a fresh allocation: no fill pattern to find there (CPU mode's
        # guarded memory is filled like the rest).
        fresh = job.mode == "memory" and not job.cpu
        try:
            exercise.judge(run.value, Case(where, args, words=words), func,
                           None if fresh else unwritten(run.value))
        except AssertionError as e:
            if element_of(e) is not None:
                e.case = k
            raise


RACE_SEEN = "gave different outputs in two runs"  # the race check's words when two runs differ


def _order_matters(job):
    """Whether the job's function gives other answers when run again, the threads of each block in another order
    (CPU mode shuffles a block's warps every run): a failed output check of a kernel with shared memory asks."""
    try:
        run_and_judge(dataclasses.replace(job, mode="race"))
    except AssertionError as e:
        return RACE_SEEN in str(e)
    return False


_spared = set()  # (exercise, sanitized check) whose spare this process has started


def prepare_spares(exercise, mode, modes=MODES):
    """Starts a spare for each sanitized check of the exercise (among a rung's modes) not yet asked for, at its first
    check in this process."""
    for check in ("memory", "race"):
        wanted = check in modes and check in exercise.case_names.get("modes", modes)
        if wanted and (exercise.topic, exercise.name, check) not in _spared:
            _spared.add((exercise.topic, exercise.name, check))
            under = sanitizer(check)
            if under is not None and check != mode:
                spare.prepare(*under)


def locate(exercise, answer):
    """(file, function, loader) of an answer as a speed test's child runs it (harness/speed.py): the module built."""
    return (*compiled(exercise, answer), None)


def check_cuda(exercise, answer, case="photo", seed=None, needs_shared=False):
    """Checks the compiled function of an exercise on one case in child processes: an input case, or memory, race,
    integrity, or speed (harness/speed.py: timed against the course's kernel; returns the points' Score)."""
    names = list(exercise.case_names[CUDA.sizes]) + [m for m in MODES if m in exercise.case_names.get("modes", MODES)]
    require_case(case, names)
    if case == "speed":
        from .speed import check_speed
        return check_speed(exercise, CUDA, answer, needs_shared=needs_shared)
    cpu = cpu_mode()
    if not cpu:
        require_gpu(f"check of {binding(exercise).func} ({case!r})")
    path, func = compiled(exercise, answer)
    source = answer if isinstance(answer, str) else (sources_of(answer) or [None])[0]
    memory_hint = guard_hint(source) if source is not None else exercise.hints["memory"]
    mode = case if case in MODES else "run"
    if not cpu:
        prepare_spares(exercise, mode)
    cases = exercise.probes(mode, seed, CUDA) if mode != "run" else exercise.inputs(case, seed, CUDA)
    if mode == "race":  # one size with several tiles and warps is enough, and racecheck is slow
        cases = cases[:1]
    nbytes = torch.empty(0, dtype=exercise.out_dtype).element_size()
    job = Job(module=path, func=func, inputs=[c.args for c in cases],
              fills=[(exercise.out_numel(c) * nbytes, fill_byte(exercise.out_dtype)) for c in cases], mode=mode,
              cpu=cpu, memory_module=memory_module() if cpu else None, exercise=(exercise.topic, exercise.name),
              wheres=[c.where for c in cases], needs_shared=needs_shared, memory_hint=memory_hint)
    try:
        try:
            run_and_judge(job)
        except KernelFailed:
            raise
        except AssertionError as e:
            if mode == "run" and cpu and "race" in exercise.hints and _order_matters(job):
                raise with_hint(e, order_hint(exercise)) from None
            if mode == "run" and element_of(e) is not None:
                raise with_facts(e, cuda_facts(job, e.element, e.case)) from None
            raise
    except OutOfBounds as e:
        raise AssertionError(f"{func}: the memory check found out-of-bounds accesses on the "
                             f"{exercise.probed_words('memory')} sizes: {e}.\nHint: {memory_hint}") from None
    except Raced as e:
        raise AssertionError(f"{func}: the race check found threads racing on shared memory on the "
                             f"{exercise.probe} sizes: {e}.\nHint: {exercise.hints['race']}") from None
    from .speed import passed
    passed(exercise, path, case)
    print(f"{func}: {case} passed")

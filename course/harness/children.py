"""Checks' child processes, from the judge's side: a job runs in a child (forked warm, a kept or sanitized spare, each
in its sandbox), and its plain-data result is judged in another child that never loaded student code.

Every rung's runner (cuda.py, triton.py) and the facts and speed tests (origin.py, speed.py) start their children
here; what a child does is child.py's, what a judge decides is judge.py's and the rung's verdict. A crash, an
illegal memory access or a hang fails that check alone, with what happened and the likely cause.
"""
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

from ..toolchain import build_root, module_path
from ..toolchain.toolkit import cuda_tool, quiet_cpp_extension
from ..device import GraderFault, cpu_mode
from ..processes import run_in_session
from . import spare, trace, wire
from .exercise import at_element
from .rungs import CUDA
from .tasks import STUDENT
from .wire import Job, Result, unreadable

TIMEOUT = 60  # seconds for one check's child process: the largest case takes well under 1 s to run
BUILD_TIMEOUT = 1800  # seconds for building a check's cuda_src: a cold CPU-mode build takes about a minute
PROFILER_IMPORTS = ("torch._dynamo",)  # what torch.profiler's first use on a GPU imports (2.5 s): once, in the server
SANITIZER_EXIT = 86  # compute-sanitizer's exit status when it found errors

_hung = set()  # compiled modules that hung in this process: later checks fail at once
_server, _server_lock = None, threading.Lock()  # the warm server every child is forked from


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
                "kernel's guard on its index, every offset you add, and every pointer you index")
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


def log_tail(path, limit=4000):
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
    lines = [line for line in log_tail(path, 64 << 20).splitlines() if line.startswith("=========")]
    return "\n".join(lines[:limit] + lines[-3:] if len(lines) > limit else lines)


def _child_env():
    return dict(os.environ, PYTHONWARNINGS="ignore")


def restart_server():
    """Retires the warm server children are forked from; the next child starts a new one (benchmarks/checks.py times
    a new server's first check)."""
    global _server
    with _server_lock:
        if _server is not None and _server.alive():
            _server.retire()
        _server = None


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
                env_now = _child_env()
                if _server is not None and _server.alive() and _server.env != env_now:
                    _server.retire()  # its children would read the build folder and caches of another environment
                    _server = None
                if _server is None or not _server.alive():
                    _server = Server(env=env_now)
                server = _server
                server.hold()
            try:
                return server.run(task, args, log, timeout, imports)
            finally:
                server.release()
        except OSError as e:  # no warm server to be had: a judge runs in a fresh interpreter, slower
            if task in STUDENT:  # student code never runs outside the server's sandboxed children
                raise GraderFault(f"the check server could not start a child ({e}): this is the grader's set-up, "
                                  "not your code") from None
    cmd = [sys.executable, "-m", "course.harness.tasks", task, *map(str, args)]
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
        output = log_tail(log)
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
        output = log_tail(log)
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
            # what ended the judge, and its last words (an empty log said nothing in CI: the code tells which it was)
            how = f"it did not finish within {timeout} s" if code is None else f"it ended with exit code {code}"
            said = log_tail(judge_log).strip() if judge_log.exists() else ""
            raise GraderFault(f"the grader could not judge this run (this is the course's fault, not yours): {how}"
                              + (f": {said}" if said else ""))
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

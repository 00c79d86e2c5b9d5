"""The CUDA rung's runner: each check runs the student's compiled function in a child process and judges what comes back.

The child (child.py) only runs: forked from a warm process (forkserver.py), or started under
compute-sanitizer for the memory and race checks. A crash, an illegal memory access or a hang fails
that check alone, with what happened and the likely cause. The verdict is computed here, from the
installed package, never in the process that ran the student's module.
"""
import dataclasses
from dataclasses import dataclass
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import torch

from ..toolchain import CompileError, build_name, built, module_path
from ..toolchain.load import sources_of
from ..device import cpu_mode, require_gpu
from . import integrity, spare, wire
from .children import (BUILD_TIMEOUT, KernelFailed, OutOfBounds, Raced, crash_hint, in_child, log_tail, memory_module,
                       run_and_judge, sanitizer)
from .wire import Job
from .evidence import guard_hint
from .origin import cuda_facts, with_facts
from .rungs import CUDA
from .exercise import (Case, element_of, exercise_named, fill_byte, order_hint, require_case, same, unwritten, with_hint)

MODES = CUDA.modes


@dataclass(frozen=True)
class Binding:
    """What the CUDA rung builds and calls for an exercise: the C++ function the module exports, and its declaration."""
    func: str
    cpp_src: str  # as the lesson gives it, byte for byte


def binding(exercise):
    """The CUDA Binding an exercise declares."""
    return exercise.bindings[CUDA.name]


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
            raise CompileError(f"building the module {why}:\n{log_tail(log, 3000)}")
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


def _same_outputs(a, b):
    """True unless two runs returned tensors (one each, or tuples of them) whose bits differ."""
    pairs = zip(a, b) if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) else [(a, b)]
    return all(same(x, y) for x, y in pairs if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor))


def verdict(job, result, rung=CUDA):
    """Judges a child's Result against the job's exercise; raises AssertionError saying what is wrong (run by judge.judge).
    rung: whose integrity rule, and the words its messages and the exercise's hints speak."""
    words = rung.words
    exercise, func, cpu = exercise_named(job.exercise), job.func, job.cpu
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

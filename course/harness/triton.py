"""The Triton rung's runner: the student's launch function, sent as source, runs in a child process like a CUDA check.

A launch function (`rgb2grey_triton(x)`, which launches an `@triton.jit` kernel) lives in the notebook, and the
child is forked from the warm check server, which never saw it: so the check sends it as text (Source: the function,
the kernels and helpers it names, its constants, its imports), written to a file under the build folder (Triton
reads a kernel's source from its file). The child (child.run with load() below as the job's loader) imports that
file and wraps each of its kernels' launches in a profiler range; cuda.py's run_and_judge runs and judges it, so a
crash, a hang or a memory fault fails one check alone, and the verdict is computed in a process that never ran it.

CPU mode: the child sets TRITON_INTERPRET=1 before it imports triton (this module imports triton only there), so
the kernel runs in Triton's interpreter, numpy underneath: each program of the grid is a Python call, hence the
small sizes (the rung's small inputs) in that mode. The interpreter differs from a GPU in what the memory check
relies on: it reads and writes the tensors' memory at the addresses the pointers hold and raises nothing itself for
an address outside a tensor. So the memory check runs the call on CPU mode's guarded memory (memory.cpp, as the
CUDA rung's CPU mode does): every tensor ends (then, in a second run, starts) at memory that cannot be touched, and
an unmasked tl.load or tl.store past a tensor's end faults; faulthandler names the kernel's line. This was chosen
over checking each pointer in a wrapper of the interpreter's load and store because it relies only on the
interpreter touching memory where the pointers point (true of every tl.load, tl.store, atomic or block pointer, in
every Triton version), not on the interpreter's internal builder API, which changes between releases; the price is
a crash rather than an exception, which the child's isolation is there for. The other runs use the padded memory,
where a small overrun reads what lies past the end, silently, as on a GPU.

The interpreter also runs Python that Triton's compiler refuses: a global that is not a tl.constexpr read in a
kernel, tiles that need more shared memory than a GPU has. So in CPU mode each launch with a new signature first
compiles the kernel for the grading host's GPU in a process of its own, where triton is imported with the
interpreter off (Triton's compiler and ptxas need no GPU; the answer is kept in the build folder): the launch
raises what it would raise there.

Integrity: the launches of the file's own kernels are ranges named TRITON_LAUNCH in the profiler, and every other
PyTorch operation is judged by integrity.py's ALLOWED_OPS, as for CUDA (the interpreter's own copies run inside a
launch's range and are the launcher's, child._launcher_own). On a GPU, compute-sanitizer checks memory and the
profiler's kernels are matched against the file's @triton.jit names (jit_names).
"""
import ast
from dataclasses import dataclass, replace
from typing import Callable
import faulthandler
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import traceback
import types

import torch

from ..device import cpu_mode, require_gpu
from ..toolchain import build_root
from . import cuda
from .child import Job
from .evidence import triton_error_hint, triton_output_hint
from .exercise import element_of, fill_byte, require_case, with_hint
from .integrity import TRITON_LAUNCH
from .record import is_kernel, kernels_of, module_name
from .rungs import TRITON

HEADER = "import torch\nimport triton\nimport triton.language as tl\n"
GPU_TARGET = ("cuda", 90, 32)  # what CPU mode compiles each kernel for: the grading host's H200 (sm_90, warps of 32)
GPU_SHARED = 232448  # bytes of shared memory a program may have there (227 KB on sm_90)
GPU_DOT_K = 16  # the least k side of a tl.dot the grading host's Triton (3.6) compiles (measured there: 8 fails, 16 works;
# Triton 3.8 takes 8), which CPU mode holds a kernel to whatever Triton it has
_SIMPLE = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class Launch:
    """What the Triton rung calls for an exercise: the launch function's name, and the memory check's hint in Triton's words."""
    func: str
    memory_hint: str
    # (source text, mode, cpu) -> what the source shows wrong that a passing run could not (None if nothing): the
    # interpreter computes in float32 with numpy, so CPU mode cannot show what a GPU's tensor cores would do
    source_verdict: Callable = None


@dataclass(frozen=True)
class Source:
    """A launch function as a module's text: the function's name, and the text (the kernels and names it uses too)."""
    name: str
    text: str


def _names(code):
    yield from code.co_names
    for const in code.co_consts:
        if inspect.iscode(const):
            yield from _names(const)


def _importable(value, name):
    """`from module import name` when value is what that import gives (a library's function, not the notebook's)."""
    module = getattr(value, "__module__", None)
    if not module or module == "__main__" or module.startswith("__"):
        return None
    try:
        if getattr(importlib.import_module(module), getattr(value, "__name__", name), None) is value:
            return f"from {module} import {value.__name__}" + (f" as {name}" if value.__name__ != name else "")
    except ImportError:
        pass
    return None


def source_of(fn):
    """A launch function as Source: its text and the text of every kernel, helper, constant and module it names."""
    if isinstance(fn, Source):
        return fn
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"pass your launch function itself, e.g. check_...(rgb2grey_triton), not {fn!r}")
    imports, constants, functions, done = [], [], [], set()

    def add(f, owner):
        try:
            functions.append(textwrap.dedent(inspect.getsource(f)))
        except (OSError, TypeError):
            raise AssertionError(f"the check cannot read the source of {f.__name__} (used by {owner}): define it in "
                                 "a notebook cell or a file") from None
        for name in _names(f.__code__):
            if name in done or name not in f.__globals__:
                continue
            done.add(name)
            value = f.__globals__[name]
            if isinstance(value, types.ModuleType):
                imports.append(f"import {value.__name__}" + (f" as {name}" if value.__name__ != name else ""))
            elif isinstance(value, _SIMPLE) or (isinstance(value, tuple) and all(isinstance(v, _SIMPLE) for v in value)):
                constants.append(f"{name} = {value!r}")
            elif type(value).__name__ == "constexpr" and isinstance(getattr(value, "value", None), _SIMPLE):
                constants.append(f"{name} = tl.constexpr({value.value!r})")
            elif is_kernel(value):
                add(value.fn, f.__name__)
            elif isinstance(value, types.FunctionType) and value.__module__ == fn.__module__:
                add(value, f.__name__)
            elif _importable(value, name):
                imports.append(_importable(value, name))
            else:
                raise AssertionError(f"{f.__name__} uses {name}, a {type(value).__name__}, which the check cannot "
                                     "send to the process that runs your function. Hint: use numbers, strings, "
                                     "functions and @triton.jit kernels defined in the notebook, and modules.")

    done.add(fn.__name__)
    add(fn, fn.__name__)
    parts = [HEADER, *dict.fromkeys(imports), *constants, *reversed(functions)]
    return Source(fn.__name__, "\n".join(p.rstrip("\n") + "\n" for p in parts))


def sendable(fn):
    """The worker's side of collecting an answer: a launch function as (name, text), which travels as plain data."""
    found = source_of(fn)
    return found.name, found.text


def collect(answers, target):
    """The judge's side: the Source of the notebook's launch function named target."""
    return Source(*answers.value("collect", ("course.harness.triton:sendable", target)))


def written(source):
    """The file a Source is kept in under the build folder (named by its hash: the same text, the same file)."""
    digest = hashlib.sha256(source.text.encode()).hexdigest()[:16]
    path = build_root() / "triton" / f"triton_answer_{digest}.py"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source.text)
        tmp.replace(path)
    return str(path)


def jit_names(path):
    """The names of the @triton.jit kernels a Source's file defines (the integrity rule's own kernels on a GPU)."""
    try:
        tree = ast.parse(open(path).read())
    except (OSError, SyntaxError):
        return None
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and any("jit" in ast.unparse(d) or "autotune" in ast.unparse(d) for d in node.decorator_list)}


def _counted(kernel, name, path=None):
    """Wraps a kernel's launches in a profiler range named after it: the integrity check's evidence of a launch.
    path: the kernel's file, to compile it for the GPU first at each launch with a new signature (CPU mode)."""
    run, compiled = kernel.run, set()

    def launch(*args, grid, warmup, **kwargs):
        if path is not None:
            compile_for_gpu(path, kernel, args, kwargs, compiled)
        with torch.autograd.profiler.record_function(TRITON_LAUNCH + name):
            return run(*args, grid=grid, warmup=warmup, **kwargs)
    kernel.run = launch


DEBUG_CALLS = ("print", "breakpoint")  # what a kernel may call in CPU mode's interpreter and the GPU compile skips


def debug_calls(text):
    """(kernel, call as written, line) of each print(...) or breakpoint() statement in the @triton.jit functions of a
    Source's text: the interpreter runs them (print shows a block at a time, breakpoint() stops there)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for kernel in tree.body:
        if isinstance(kernel, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in kernel.decorator_list):
            for node in ast.walk(kernel):
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                        and isinstance(node.value.func, ast.Name) and node.value.func.id in DEBUG_CALLS:
                    found.append((kernel.name, ast.unparse(node.value), node))
    return found


def for_gpu(path):
    """The file CPU mode compiles for the GPU: the Source's own, or a copy with each print(...) and breakpoint() in
    its kernels replaced by `pass` (line for line), which the interpreter runs but the GPU's compiler refuses or turns
    into tl.device_print (print(offs) without a leading string does not compile there)."""
    text = open(path).read()
    calls = debug_calls(text)
    if not calls:
        return path
    lines = text.splitlines(True)
    for _, _, node in sorted(calls, key=lambda c: (c[2].lineno, c[2].col_offset), reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1
        tail = lines[last][node.end_col_offset:]
        lines[first] = lines[first][:node.col_offset] + "pass" + tail  # the lines after it stay, empty
        for i in range(first + 1, last + 1):
            lines[i] = "\n"
    copy = path[:-3] + "_for_gpu.py"
    if os.path.exists(copy) or _kept(copy, "".join(lines)):
        return copy
    copy = os.path.join(tempfile.gettempdir(), os.path.basename(copy))  # a sandboxed child writes its own folder only
    return copy if _kept(copy, "".join(lines)) else path


def _kept(path, text):
    """Writes text to path whole (another process reads it only complete); False where the folder is not writable."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        return False
    return True


class CompilationError(Exception):
    """What Triton's compiler said of a kernel compiled for the GPU in a process of its own (CPU mode): its own text."""


# Run as `python -c COMPILE file kernel spec`: a process where triton is imported with the interpreter off, so
# the kernels (and tl's own @jit functions, like tl.cdiv) are compiled ones. Prints one JSON line.
COMPILE = """
import importlib.util, json, sys
path, name, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
found = importlib.util.spec_from_file_location("answer", path)
module = importlib.util.module_from_spec(found)
sys.modules["answer"] = module
found.loader.exec_module(module)
import re
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.errors import CompilationError
try:
    binary = triton.compile(ASTSource(getattr(module, name), spec["signature"], spec["constexprs"]),
                            target=GPUTarget(*spec["target"]), options=spec["options"])
except CompilationError as e:  # a k side this Triton refuses is told with the grading host's bound, if higher
    print(json.dumps({"error": re.sub(r"K >= (\\d+)", lambda m: f"K >= {max(int(m[1]), spec['dot_k'])}", str(e))}))
else:
    small = [d for d in re.findall(r"tt\\.dot .*?: tensor<(\\d+)x(\\d+)x\\w+> \\* tensor<\\d+x(\\d+)x", binary.asm["ttir"])
             if int(d[1]) < spec["dot_k"]]
    if small:
        m, k, n = small[0]
        print(json.dumps({"error": f"Input shapes should have M >= 1, N >= 1 and K >= {spec['dot_k']} (tl.dot of a "
                                   f"{m}x{k} tile and a {k}x{n} tile: the grading host's Triton refuses a k side below "
                                   f"{spec['dot_k']}, though Triton {triton.__version__} here compiles it)"}))
    else:
        print(json.dumps({"shared": binary.metadata.shared}))
"""


def compile_for_gpu(path, kernel, args, kwargs, done):
    """Compiles a kernel of a file for the grading host's GPU (GPU_TARGET) as a launch with these arguments would,
    with no GPU (CPU mode): raises what a launch there raises first, a CompilationError or too little shared memory.
    done: the signatures compiled already in this process, skipped."""
    from triton.runtime.errors import OutOfResources
    from triton.runtime.jit import mangle_type
    declared = inspect.signature(kernel.fn)
    params = declared.parameters
    bound = declared.bind(*args, **{k: v for k, v in kwargs.items() if k in params})
    bound.apply_defaults()
    signature, constexprs = {}, {}
    for name, value in bound.arguments.items():
        if "constexpr" in str(params[name].annotation) or value is None:
            signature[name], constexprs[name] = "constexpr", value
        else:
            signature[name] = mangle_type(value)
    # the bound is tl.dot's: a sum that this Triton's compiler turns into a dot of its own is not held to it
    dot_k = GPU_DOT_K if re.search(r"\bdot\s*\(", open(path).read()) else 0
    spec = {"signature": signature, "constexprs": constexprs, "target": GPU_TARGET, "dot_k": dot_k,
            "options": {k: v for k, v in kwargs.items() if k not in params}}
    try:
        key = json.dumps(spec, sort_keys=True)
    except TypeError:  # a constexpr that is not plain data (a tl.dtype): the interpreter alone decides
        return
    if key in done:
        return
    done.add(key)
    path = for_gpu(path)
    digest = hashlib.sha256((open(path).read() + key + kernel.fn.__name__ + COMPILE).encode()).hexdigest()[:16]
    kept = build_root() / "triton" / "compiled" / f"{digest}.json"
    if kept.exists():
        said = json.loads(kept.read_text())
    else:
        ran = subprocess.run([sys.executable, "-c", COMPILE, path, kernel.fn.__name__, key], capture_output=True,
                             text=True, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
        if ran.returncode != 0 or not ran.stdout.strip():  # the compiler's set-up, not the kernel: nothing to say
            print(f"(the course could not compile {kernel.fn.__name__} for the GPU here: "
                  f"{(ran.stderr.strip().splitlines() or ['?'])[-1]})")
            return
        said = json.loads(ran.stdout.strip().splitlines()[-1])
        _kept(str(kept), json.dumps(said))  # where the build folder is read-only (a sandboxed child), not kept
    if "error" in said:
        raise CompilationError(said["error"])
    if said["shared"] > GPU_SHARED:
        raise OutOfResources(said["shared"], GPU_SHARED, "shared memory")


NO_BREAKPOINT = ("breakpoint() {where}: not stopping, this process of its own has no keyboard; call your launch "
                 "function in a cell of the notebook (CPU mode) to stop there")


def _no_keyboard(path):
    """A breakpoint() hook for the child: one line saying why it does not stop (pdb there would read no input and
    end the call with BdbQuit), once per place."""
    said = set()

    def hook(*args, **kwargs):
        frame = sys._getframe(1)
        where = _line_of(path, [(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)]) or "your code"
        if where not in said:
            said.add(where)
            print(NO_BREAKPOINT.format(where=where), flush=True)
    return hook


def _line_of(path, frames):
    """Where in the answer's file the innermost of frames (file, line, function) is: "in kernel: `code`", or None."""
    for file, line, func in reversed(list(frames)):
        if file == path:
            lines = open(path).read().splitlines()
            return f"in {func}: `{lines[line - 1].strip()}`" if 0 < line <= len(lines) else f"in {func}"
    return None


def _frames(error):
    """(file, line, function) of every frame of an exception's traceback and of those it was raised from, outermost
    first."""
    seen, out = set(), []
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        out = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(error.__traceback__)] + out
        error = error.__cause__ or error.__context__
    return out


def _with_line(fn, path):
    """fn, whose errors name the line of the answer they came from (the file the child runs is the check's assembly
    of the notebook's cells, so its line numbers would tell the student nothing): the same error type's name."""
    @functools.wraps(fn)
    def launch(*args):
        try:
            return fn(*args)
        except Exception as e:
            where = _line_of(path, _frames(e))
            if where is None or where in str(e) or type(e).__name__ == "CompilationError":  # it shows its line
                raise
            raise type(type(e).__name__, (Exception,), {})(f"{e}\n  ({where})") from None
    return launch


def load(job):
    """The child's loader (child.run): imports a Source's file, Triton interpreted in CPU mode; the launch function,
    whose errors name the student's line."""
    if job.cpu:
        os.environ["TRITON_INTERPRET"] = "1"
    faulthandler.enable()  # a memory fault in the kernel prints the kernel's line to the log
    sys.breakpointhook = _no_keyboard(job.module)
    name = module_name(job.module)
    spec = importlib.util.spec_from_file_location(name, job.module)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    for key, value in kernels_of(module).items():
        _counted(value, key, job.module if job.cpu else None)
    return _with_line(getattr(module, job.func), job.module)


def locate(exercise, answer):
    """(file, function, loader) of a launch function as a speed test's child runs it (harness/speed.py)."""
    source = source_of(answer)
    return written(source), source.name, "course.harness.triton:load"


def verdict(job, result):
    """Judges a child's Result (child.judge): the CUDA rung's verdict, with Triton's integrity rule and words."""
    cuda.verdict(job, result, TRITON)


def _faulted_line(output, module):
    """The kernel's line a memory fault happened on, from faulthandler's stack in the child's output; None if absent."""
    for path, line, func in re.findall(r'File "(.+?)", line (\d+) in (\w+)', output or ""):
        if path == module:
            lines = open(module).read().splitlines()
            return f"in {func}: `{lines[int(line) - 1].strip()}`" if int(line) <= len(lines) else None
    return None


FAULT_HINT = ("a lane read or wrote far outside a tensor, at an address where no memory is (in CPU mode the "
              "interpreter touches that address itself): mask every tl.load and tl.store (mask = offs < n), and check "
              "each offset and stride added to a pointer (strides passed in the wrong order, m.stride(1) for the rows, "
              "walk far past a matrix)")
_DUMP = re.compile(r"^(Fatal Python error|Current thread|Thread 0x|Stack \(most recent|  File |  <no Python frame>|"
                   r"Extension modules:|\(total: \d+\))")


def crashed(func, failed, path, fault_hint=None):
    """A child's crash (cuda.KernelFailed) in Triton's words: how the process ended, the kernel's line it ended on and
    a hint, without faulthandler's stack and list of extension modules. fault_hint: the exercise's, for a memory
    fault."""
    output = getattr(failed, "output", None)
    if output is None:  # a hang, or a call skipped after one: its message is already short
        return failed
    how = re.search(r"crashed with \w+|stopped with exit code -?\d+", str(failed))
    line = _faulted_line(output, path)
    said = [s for s in output.strip().splitlines() if s.strip() and not _DUMP.match(s)][-3:]
    if re.search(r"SIGSEGV|SIGBUS", str(failed)):
        hint = f"{FAULT_HINT}. {fault_hint}" if fault_hint else FAULT_HINT
    else:
        hint = cuda.crash_hint("\n".join(said) or str(failed), TRITON.words)
    shown = "".join(f"\n  {s}" for s in said)
    return cuda.KernelFailed(f"the process running {func} {how.group(0) if how else 'crashed'}"
                             f"{', ' + line if line else ''}.{shown}\nHint: {hint.rstrip('.')}.")


def explained(verdict, text, fault_hint=None):
    """A check's verdict with the hint the answer's source gives instead of the output's (evidence.py): for an error
    its launch raised, a pointer indexed with [ ]; for wrong elements, a program id the grid has no axis for. A
    GPU's illegal memory access gets Triton's words (fault_hint: the exercise's) rather than the CUDA rung's."""
    message = str(verdict)
    if "raised an error" in message and re.search(r"illegal memory access|illegal address", message):
        hint = f"{FAULT_HINT}. {fault_hint}" if fault_hint else FAULT_HINT
    elif "raised an error" in message:
        hint = triton_error_hint(text, message)
    elif element_of(verdict) is not None:
        hint = triton_output_hint(text)
    else:
        hint = None
    return with_hint(verdict, hint.rstrip(".") + ".") if hint else verdict


_told = set()  # the Sources whose print and breakpoint() calls a check has spoken of in this process


def _say_where_debug_calls_go(source):
    """One line, once per answer, saying that a check runs the kernel's print and breakpoint() calls where nothing shows
    them (a process of its own, its output kept for the verdict), and where they do show."""
    calls = debug_calls(source.text)
    if calls and source.text not in _told:
        _told.add(source.text)
        shown = ", ".join(dict.fromkeys(f"`{call}` in {kernel}" for kernel, call, _ in calls))
        print(f"(checks run {shown} in a process of their own, which shows nothing: call {source.name}(...) in a cell "
              "to see a print, or stop at a breakpoint() (CPU mode); isolated(...) shows a print too)")


def check_triton(exercise, answer, case="photo", seed=None):
    """Checks a launch function of an exercise on one case in child processes: an input case, or memory, integrity."""
    launch = exercise.bindings[TRITON.name]
    modes = [m for m in TRITON.modes if m in exercise.case_names.get("modes", TRITON.modes)]
    require_case(case, list(exercise.case_names[TRITON.sizes]) + modes)
    if case == "speed":  # timed against the course's own kernel (harness/speed.py): returns the points' Score
        from .speed import check_speed
        return check_speed(exercise, TRITON, answer)
    source = source_of(answer)
    cpu = cpu_mode()
    path = written(source)
    mode = case if case in TRITON.modes else "run"
    if not cpu:
        require_gpu(f"check of {source.name} ({case!r})")
        cuda.prepare_spares(exercise, mode, TRITON.modes)
    rung = replace(TRITON, small=cpu)  # the interpreter runs a program per Python call: small inputs in CPU mode
    cases = exercise.probes(mode, seed, rung) if mode != "run" else exercise.inputs(case, seed, rung)
    nbytes = torch.empty(0, dtype=exercise.out_dtype).element_size()
    job = Job(module=path, func=source.name, inputs=[c.args for c in cases],
              fills=[(exercise.out_numel(c) * nbytes, fill_byte(exercise.out_dtype)) for c in cases], mode=mode,
              cpu=cpu, memory_module=cuda.memory_module() if cpu else None, exercise=(exercise.topic, exercise.name),
              wheres=[c.where for c in cases], memory_hint=launch.memory_hint,
              loader="course.harness.triton:load", verdict="course.harness.triton:verdict")
    found = (f"{source.name}: the memory check found an access outside a tensor on the "
             f"{exercise.probed_words('memory')} sizes")
    _say_where_debug_calls_go(source)
    try:
        cuda.run_and_judge(job)
    except cuda.OutOfBounds as e:
        raise AssertionError(f"{found}: {e}.\nHint: {launch.memory_hint}") from None
    except cuda.KernelFailed as e:
        line = _faulted_line(getattr(e, "output", None), path)
        if mode == "memory" and cpu and re.search(r"SIGSEGV|SIGBUS", str(e)):
            where = f", {line}" if line else ""
            raise AssertionError(f"{found}: your kernel read or wrote past the end (or before the start) of a "
                                 f"tensor{where}.\nHint: {launch.memory_hint}") from None
        raise crashed(source.name, e, path, launch.memory_hint) from None
    except AssertionError as e:
        raise explained(e, source.text, launch.memory_hint) from None
    problem = launch.source_verdict(source.text, mode, cpu) if launch.source_verdict else None
    if problem:
        raise AssertionError(f"{source.name}: {problem}")
    from .speed import passed
    passed(exercise, path, case)
    print(f"{source.name}: {case} passed")

"""A rung as a plug-in: what a check needs to know about where an answer runs, declared once per rung.

Topics, the harness and grading ask a Rung (or its Answer) instead of comparing rung names. Where each part is read:

sizes, small   Exercise.inputs picks the case names by sizes; a topic's cases(case, seed, rung) pick their size
               table by rung.sizes and small inputs by rung.small (topics/*.py, grading/commands/new.py's template)
runner         Rung.check(exercise, answer, case, seed): python.py's check_python, cuda.py's check_cuda, triton.py's
               check_triton (which runs its children through cuda.py's run_and_judge, with its own loader and verdict)
modes          the checks beyond input cases that the runner offers (cuda.py: memory, race, integrity; speed, which
               harness/speed.py runs for an exercise that declares a Speed for the rung, in Exercise.speed)
locate         a speed test's question, which file and function the child times (and the rung's loader)
own_kernels    the integrity rule's question, which kernels are the student's (cuda.py's verdict, in the judge
               child; CUDA: nvcc's host stub of each __global__ function, integrity.module_kernels; Triton: the
               @triton.jit functions of the answer's file)
answer         exercise.judges marks a check with it; grading/nbgrader/trusted.py's judge_cell collects the answer with
               Answer.collect (grading/run/verify.py's clean re-runs too), and keeps the notebook's own message where
               Answer.kernel_message (a Python rung's hints read the student's kernel and what the runners did)
Exercise.bindings[rung name]   what a runner needs from an exercise beyond the shared fields (cuda.py's Binding:
               the C++ function the module exports and its declaration; triton.py's Launch: the launch function's
               name and the memory hint in Triton's words)

The Python runners' evidence is a record per call (ladder.recording: threads, launches, shared memory use, the
order of a block's threads) that python.py's call_recorded returns and check_python hands back. Still outside the
Rung: grading/nbgrader/trusted.py's worker side (answer) knows the requests by name ("collect" runs a rung's own function
on the notebook's value, in the worker: Triton's source of a launch function) and relays a record's shared
memory use and thread order itself.
words          a rung's vocabulary for hints: the runners put it into each Case's words (case.words["lang"] is "python",
               "cuda" or "triton"), so a topic's hint says "the grid" or "the index" in the rung's own code, and
               integrity.judge says how the rung launches and allocates
"""
from dataclasses import dataclass, field
import importlib
from typing import Callable



@dataclass(frozen=True)
class Answer:
    """What a test cell's check judges, and how the trusted judge collects it from the notebook's kernel."""
    name: str                         # the check's answer_kind: "python", "cuda", "value", "triton"
    collect: Callable                 # (answers, target name) -> the answer the check is called with
    kernel_message: bool = False      # a failed check shows the message the notebook's own run of the cell gives


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: its size table, its runner, its check modes and integrity rule, its answers."""
    name: str
    sizes: str                        # the key of case_names and of the topics' size tables
    small: bool                       # its cases stay small: every element costs a Python call
    runner: Callable                  # (exercise, answer, case, seed, **options) -> None or AssertionError
    answer: Answer
    modes: tuple = ()                 # check modes beyond input cases
    own_kernels: Callable = None      # (built file) -> names of the student's kernels in it, None if unreadable
    locate: Callable = None           # (exercise, answer) -> (file, function, loader): what a speed test's child runs
    words: dict = field(default_factory=dict)  # how hints name the rung's launch, index, grid and output (WORDS_KEYS)
    children: bool = False            # its runner runs each answer in child processes (a check may run in any thread)

    def check(self, exercise, answer, case, seed=None, **options):
        """Runs the rung's check of an answer on one case of an exercise."""
        return self.runner(exercise, answer, case, seed, **options)


def imported(path):
    """A function named "module:function", imported at its first call (the runners import this module)."""
    def call(*args, **kwargs):
        module, name = path.split(":")
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    call.__name__ = path
    return call


def _function(answers, target):
    return answers.function(target)


def _source(answers, target):
    source = answers.value("cuda_src", target)
    if not isinstance(source, str):
        raise AssertionError("the notebook holds no cuda_src to check")
    return source


def _value(answers, target):
    return answers.value("value", target)


FUNCTION = Answer("python", _function, kernel_message=True)  # a stand-in that calls the function in the kernel
SOURCE = Answer("cuda", _source)                             # cuda_src as text, built and run by the judge
VALUE = Answer("value", _value)                              # the value itself
TRITON_SOURCE = Answer("triton", imported("course.harness.triton:collect"))  # a launch function's source, run by the judge
ANSWERS = {a.name: a for a in (FUNCTION, SOURCE, VALUE, TRITON_SOURCE)}

# The words a rung declares, each a piece of code or a noun its hints use.
WORDS_KEYS = ("lang",      # "python", "cuda", "triton"
              "launch",    # how a wrapper launches a kernel (integrity's hint)
              "create",    # how it creates the output
              "allocate",  # how it puts the output on the input's device
              "dtype",     # how it gives the output the input's dtype
              "index",     # a 1D kernel's global index
              "lane",      # what handles one element: a thread, or one lane of a program's block
              "first",     # the first of them
              "group",     # a group of them (a block, a program), and its plural
              "groups",
              "grid",      # the grid that covers n elements, rounding up
              "floor",     # the same rounded down (the classic mistake)
              "columns",   # a 2D grid's extent across w columns
              "store",     # storing an element
              "code",      # where an error the student's code raised comes from
              "crashes")   # (pattern, hint) pairs: the rung's own causes of an error (the hint formats the groups)
PYTHON_WORDS = {"lang": "python", "launch": "call it with blk_kernel(f, blocks, threads, ...)",
                "create": "torch.empty", "allocate": "create it with device=x.device", "dtype": "dtype=x.dtype",
                "index": "i = blockidx*blockdim + threadidx", "lane": "thread", "first": "thread 0 of block 0",
                "group": "block", "groups": "blocks", "grid": "cdiv(n, threads)", "floor": "n // threads",
                "columns": "blocks.x = cdiv(w, threads.x)", "store": "out[i] = ...",
                "code": "your function or from your kernel", "crashes": ()}
CUDA_WORDS = {"lang": "cuda", "launch": "launch it with kernel<<<blocks, threads>>>(...)", "create": "torch::empty",
              "allocate": "allocate it with input.options()", "dtype": "input.options()",
              "index": "i = blockIdx.x*blockDim.x + threadIdx.x", "lane": "thread", "first": "thread 0 of block 0",
              "group": "block", "groups": "blocks", "grid": "cdiv(n, threads)", "floor": "n / threads",
              "columns": "blocks.x = cdiv(w, threads.x)", "store": "out[i] = ...",
              "code": "your C++ function or from your kernel", "crashes": ()}
TRITON_WORDS = {"lang": "triton", "launch": "launch it with kernel[grid](...)", "create": "torch.empty",
                "allocate": "create it with torch.empty(..., device=x.device)", "dtype": "dtype=x.dtype",
                "index": "offs = tl.program_id(0)*BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
                "lane": "program lane", "first": "lane 0 of program 0", "group": "program",
                "groups": "programs", "grid": "triton.cdiv(n, BLOCK_SIZE)", "floor": "n // BLOCK_SIZE",
                "columns": "triton.cdiv(w, BLOCK_W) programs along the columns' axis",
                "store": "tl.store(out_ptr + offs, ..., mask=mask)",
                "code": "your launch function or from your @triton.jit kernel",
                "crashes": (
                    (r"Cannot access global variable (\w+)",
                     "a @triton.jit kernel may read a global only if it is a tl.constexpr: define it as "
                     "`{0} = tl.constexpr(...)`, or pass it to the kernel as an argument annotated `: tl.constexpr` "
                     "(CPU mode's interpreter would run it as it is, but the GPU's compiler refuses it, and the "
                     "checks compile your kernel as the GPU does)"),
                    (r"out of resource: shared memory",
                     "the kernel's tiles need more shared memory than one program can have on the GPU: make BM, BN "
                     "or BK smaller (or num_stages, which keeps that many tiles in flight)"),
                    (r"object of type '(\w+)' has no len\(\)",
                     "the grid must be a tuple, one entry per axis: kernel[(triton.cdiv(n, BLOCK_SIZE),)](...), with "
                     "the comma ((x) is just x, of type {0}; (x,) is a tuple), or a function of the meta-parameters "
                     "that returns one"),
                    (r"Boolean value of Tensor with more than one value is ambiguous",
                     "`if`, `while`, `and`, `or` and `not` ask one True or False, and a comparison of a block gives "
                     "one per lane: that is a mask. Pass it to the loads and stores, mask = offs < n, "
                     "tl.load(x_ptr + offs, mask=mask), tl.store(out_ptr + offs, y, mask=mask); choose values lane "
                     "by lane with tl.where(cond, a, b), and combine masks with & and |"),
                    (r"is not string|cannot convert \w+ of type <class 'str'> to tensor",
                     "on a GPU, print in a kernel is compiled into tl.device_print(prefix, *values): one string first, "
                     "then blocks, e.g. print(\"offs\", offs) (a line per lane, from the GPU). CPU mode's checks skip "
                     "print; in the interpreter print(offs) shows a program's whole block"),
                    (r"breakpoint is not defined",
                     "breakpoint() stops only in CPU mode's interpreter, where a kernel is plain Python; a GPU runs "
                     "the compiled kernel, which has no breakpoint(): remove it (print(\"offs\", offs) works on both)"),
                    (r"NameError\('(\w+) is not defined'\)",
                     "{0} is not defined where the line marked ^ uses it: in a @triton.jit kernel a variable set "
                     "inside a for loop or an if must be set before it too (acc = tl.zeros((BM, BN), "
                     "dtype=tl.float32) before the loop, acc += ... inside), and a name from outside the kernel must "
                     "be one of its arguments or a tl.constexpr global"),
                    (r"Input shapes should have M >= (\d+), N >= (\d+) and K >= (\d+)",
                     "tl.dot's tiles are smaller than the GPU's compiler takes: the k side (BK) must be at least {2} "
                     "(the rows and columns, BM and BN, at least {0} and {1}); the lesson's 64x64x32 tiles fit"),
                    (r"forget to add @triton\.jit",
                     "Triton cannot compile the operation at the line marked ^ in a kernel: there, read memory only "
                     "with tl.load(ptr + offs, mask=mask) (a pointer cannot be indexed with [ ]), and call only tl.* "
                     "functions and other @triton.jit functions"))}

PYTHON = Rung("python", sizes="python", small=True, runner=imported("course.harness.python:check_python"),
              answer=FUNCTION, words=PYTHON_WORDS)
CUDA = Rung("cuda", sizes="cuda", small=False, runner=imported("course.harness.cuda:check_cuda"), answer=SOURCE,
            modes=("memory", "race", "integrity", "speed"), own_kernels=imported("course.harness.integrity:module_kernels"),
            locate=imported("course.harness.cuda:locate"), words=CUDA_WORDS, children=True)
TRITON = Rung("triton", sizes="triton", small=False, runner=imported("course.harness.triton:check_triton"),
              answer=TRITON_SOURCE, modes=("memory", "integrity", "speed"),
              own_kernels=imported("course.harness.triton:jit_names"), locate=imported("course.harness.triton:locate"),
              words=TRITON_WORDS, children=True)
RUNGS = {r.name: r for r in (PYTHON, CUDA, TRITON)}

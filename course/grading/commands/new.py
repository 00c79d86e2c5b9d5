"""`course new NAME`: a new assignment declared whole, to edit: its notebooks (one a rung), its topic module, example
students and a corpus skeleton. As generated it computes out = a*x + y (SAXPY, a scalar and two float32 vectors),
and releases, grades and passes nbval; the instructor then swaps in their own algorithm. --triton adds the Triton
rung after CUDA C (05_L4_triton: a @triton.jit kernel and its launch function), its check and its answers."""
import hashlib
import json
import keyword
import re
from pathlib import Path
from string import Template

from ...assignments import PACKAGE
from ..run.layout import CourseError, course_root

RUNGS = ("01_L0_loop", "02_L1_run_kernel", "03_L2_blk_kernel", "04_L3_cuda")
TRITON_RUNG = "05_L4_triton"  # after CUDA C only: its lesson translates the L3 kernel

TOPIC = '''"""$Title: out = a*x + y for a float32 scalar a and vectors x, y (written by `course new $name`: edit the
reference, the cases, the comparison and the hints for your own algorithm; the notebooks in source/$name/ call
the checks at the end)."""
import torch

from ..harness.cuda import Binding, binding, check_cuda
from ..harness.exercise import Case, Exercise, expect_tensor, judges, wrong_elements
from ..harness.python import check_python
from ..harness.rungs import CUDA, PYTHON$triton_rung$triton_import

__all__ = ("$name", "check_$name", "check_${name}_cuda"$triton_all)

U32 = 2.0 ** -24  # float32's unit roundoff
CPP_SRC = "torch::Tensor $name(double a, torch::Tensor x, torch::Tensor y);"  # byte-identical to the L3 notebook's
A = 2.5  # the scalar every case passes
SIZES = {"python": {"tiny": [1], "ragged": [7, 257, 1023]},  # not multiples of a block of 256
         "cuda": {"tiny": [1], "ragged": [7, 257, 1023], "large": [1 << 20]}$triton_sizes}
HINTS = {
    "wrong": "each element is a*x[i] + y[i], from the x[i] and y[i] of its own i.",
    # in the words of the rung that ran the answer (harness/rungs.py's WORDS_KEYS)
    "never": "every i from 0 to n-1 needs a {lane} of its own: {grid} {groups} and {index}; store {store} (a kernel's "
             "return value is lost).",
    "memory": "a thread past the last element must do nothing: guard the body with `if (i < n)`.",$triton_hint
}


def $name(a, x, y):
    """The reference: a*x + y in float32."""
    return a * x + y


def ${name}_cases(case, seed, rung):
    """The named inputs of a check for a rung: Cases of (a, x, y), x and y float32 vectors of one size."""
    if case == "random":
        g = torch.Generator().manual_seed(seed)
        sizes = [int(v) for v in torch.randint(1, 3000 if rung.small else 100_000, (3,), generator=g)]
    else:
        sizes = SIZES[rung.sizes][case]
    out = []
    for n in sizes:
        g = torch.Generator().manual_seed(n * 7919 + (seed or 0))
        words = f"vectors of {n:,} element{'s' if n > 1 else ''} (a = {A})"
        out.append(Case(words, (A, torch.randn(n, generator=g), torch.randn(n, generator=g))))
    return out


def judge_$name(yours, case, what, unwritten=None):
    """Asserts yours is a*x + y: float32, x's shape, each element within 3u(|a*x| + |y|) of the exact value."""
    a, x, y = case.args
    expect_tensor(yours, what, case.where, x.shape, torch.float32, {
        "return": ", e.g. `return out`",
        "shape": "one output element per input element: torch.empty_like(x).",
        "dtype": "the inputs are float32: make the output float32 too (torch.empty_like(x))."})
    exact = a * x.double() + y.double()
    # the product and the sum each round once (a fused multiply-add once): 2u, and u more for second-order terms
    bad = ~((yours.cpu().double() - exact).abs() <= 3 * U32 * (abs(a) * x.double().abs() + y.double().abs()))
    if not bool(bad.any()):
        return
    i = int(bad.nonzero()[0])
    never = unwritten is not None and bool(unwritten.cpu()[i])
    words = {**CUDA.words, **case.words}
    msg = (f"{what}: {int(bad.sum()):,} of {x.numel():,} elements are wrong for {case.where}.\\n"
           f"  first at element {i}: yours {float(yours[i]):.7g}, expected {float(exact[i]):.7g} "
           f"(a = {a}, x[{i}] = {float(x[i]):.7g}, y[{i}] = {float(y[i]):.7g})")
    if never:
        msg += "\\n  it still holds NaN, the value the memory had before your code ran: it was never written."
    raise wrong_elements(f"{msg}\\nHint: {HINTS['never' if never else 'wrong'].format(**words)}", bad)


$NAME = Exercise(
    name="$name", topic=__name__, cases=${name}_cases, judge=judge_$name, out_dtype=torch.float32,
    case_names={"python": ("tiny", "ragged", "random"), "cuda": ("tiny", "ragged", "large", "random"),$triton_cases
                "modes": ("memory", "integrity")},
    out_numel=lambda case: case.args[1].numel(), bindings={"cuda": Binding("$name", CPP_SRC)$triton_binding},
    hints={"memory": HINTS["memory"], "computes": "every element"})


@judges(PYTHON)
def check_$name(fn, case="ragged", seed=None):
    """Checks a Python-rung $name function against the reference on one case of inputs."""
    check_python($NAME, fn, case, seed)


@judges(CUDA)
def check_${name}_cuda(answer, case="ragged", func="$name", seed=None):
    """Checks a compiled $name (your cuda_src, or the module load_cuda built) on one case: an input case, "memory" or "integrity"."""
    if func != binding($NAME).func:
        raise ValueError(f"the $name exercise's function is {binding($NAME).func}, not {func!r}")
    check_cuda($NAME, answer, case, seed)
$triton_check'''
# what --triton adds to TOPIC (each empty without it)
TRITON_TOPIC = {
    "triton_rung": ", TRITON",
    "triton_import": "\nfrom ..harness.triton import Launch, check_triton",
    "triton_all": ', "check_${name}_triton"',
    "triton_sizes": ',\n         "triton": {"tiny": [1], "ragged": [7, 257, 1023]}',
    "triton_hint": '''
    "memory_triton": "a program's lanes past the last element must touch nothing: compute mask = offs < n and pass it "
                     "to every tl.load and tl.store (mask=mask).",''',
    # no large case: in CPU mode the interpreter runs a Python call per program
    "triton_cases": '\n                "triton": ("tiny", "ragged", "random"),',
    "triton_binding": ', "triton": Launch("${name}_triton", HINTS["memory_triton"])',
    "triton_check": '''

@judges(TRITON)
def check_${name}_triton(fn, case="ragged", seed=None):
    """Checks the launch function of a @triton.jit $name kernel on one case: an input case, "memory" or "integrity"."""
    check_triton($NAME, fn, case, seed)
''',
}

# per rung: the solution cell, its grade_id, and what its test cells pass to the check
SOLUTIONS = {
    "01_L0_loop": ('''def ${name}_py(a, x, y):
    n = x.numel()
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    ### BEGIN SOLUTION
    for i in range(n):
        out[i] = a*x[i] + y[i]
    ### END SOLUTION
    return out''', "${name}_py", "${name}_py"),
    "02_L1_run_kernel": ('''def ${name}_k(i, a, x, y, out):
    ### BEGIN SOLUTION
    out[i] = a*x[i] + y[i]
    ### END SOLUTION

def ${name}_pyk(a, x, y):
    n = x.numel()
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    run_kernel(${name}_k, n, a, x, y, out)
    return out''', "${name}_k", "${name}_pyk"),
    "03_L2_blk_kernel": ('''def ${name}_bk(blockidx, threadidx, blockdim, a, x, y, out, n):
    ### BEGIN SOLUTION
    i = blockidx*blockdim + threadidx
    if i < n:
        out[i] = a*x[i] + y[i]
    ### END SOLUTION

def ${name}_pybk(a, x, y):
    n = x.numel()
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    threads = 256
    blk_kernel(${name}_bk, cdiv(n, threads), threads, a, x, y, out, n)
    return out''', "${name}_bk", "${name}_pybk"),
    "04_L3_cuda": ('''cuda_src = cuda_begin + r"""
__global__ void ${name}_kernel(float a, const float* x, const float* y, float* out, int n) {
    // BEGIN SOLUTION
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a*x[i] + y[i];
    // END SOLUTION
}

torch::Tensor $name(double a, torch::Tensor x, torch::Tensor y) {
    CHECK_INPUT(x);
    CHECK_INPUT(y);
    int n = x.numel();
    auto out = torch::empty_like(x);
    int threads = 256;
    if (n > 0) {
        // BEGIN SOLUTION
        ${name}_kernel<<<cdiv(n, threads), threads>>>(
            (float)a, x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), n);
        // END SOLUTION
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""
module = load_cuda(cuda_src, cpp_src, ["$name"])''', "${name}_cuda", "cuda_src"),
    TRITON_RUNG: ('''@triton.jit
def ${name}_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK_SIZE: tl.constexpr):
    ### BEGIN SOLUTION
    pid = tl.program_id(0)
    offs = pid*BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a*x + y, mask=mask)
    ### END SOLUTION

def ${name}_triton(a, x, y):
    n = x.numel()
    out = torch.empty_like(x)
    ### BEGIN SOLUTION
    ${name}_kernel[(triton.cdiv(n, 256),)](x, y, out, a, n, BLOCK_SIZE=256)
    ### END SOLUTION
    return out''', "${name}_triton", "${name}_triton"),
}
# per rung: the title's end, the goal, the imports, and the words before the reference is shown
HEADS = {
    "01_L0_loop": ("rung 0: a Python loop", "compute `out[i] = a*x[i] + y[i]` for every element with a plain Python loop: "
                   "the algorithm alone, before the GPU's shape arrives.", "import torch\nfrom course import $name, check_$name",
                   "The reference, `$name(a, x, y)` in `course/topics/$name.py`, computes the same with PyTorch:"),
    "02_L1_run_kernel": ("rung 1: a kernel for one thread", "write the loop's body as a function of `i` alone, the way "
                         "a CUDA thread sees the problem; `run_kernel` does the looping.",
                         "import torch\nfrom course import $name, run_kernel, check_$name",
                         "`run_kernel(f, n, *args)` calls `f(i, *args)` for each `i` below `n`. The reference:"),
    "03_L2_blk_kernel": ("rung 2: blocks and threads", "find `i` from the block and the thread, as CUDA does, and "
                         "guard it: the last block has threads past the end.",
                         "import torch\nfrom course import $name, blk_kernel, cdiv, check_$name",
                         "`blk_kernel(f, blocks, threads, *args)` calls `f(blockidx, threadidx, blockdim, *args)` for "
                         "each block and thread; `cdiv(n, threads)` blocks cover n elements. The reference:"),
    "04_L3_cuda": ("rung 3: CUDA C", "the same kernel in CUDA C, compiled from the notebook with `load_cuda` (in CPU "
                   "mode where there is no GPU).",
                   "import torch\nfrom course import ($name, cuda_begin, load_cuda, isolated, device, cpu_mode, "
                   "cpu_banner,\n                    check_${name}_cuda)\n"
                   "print(cpu_banner() if cpu_mode() else f\"GPU: {torch.cuda.get_device_name()}\")",
                   "The C++ function `$name` is what Python calls: `cpp_src` declares it for the binding. The reference:"),
    TRITON_RUNG: ("rung 4: Triton", "the same kernel in Triton, written for a whole program (CUDA's block) at once, "
                  "compiled at its first launch (in CPU mode, where there is no GPU, Triton's interpreter runs each "
                  "program as a Python call, so the checks use small sizes).",
                  "import os\nimport torch\nfrom course import $name, device, isolated, cpu_mode, cpu_banner, "
                  "check_${name}_triton\nif cpu_mode():\n"
                  "    os.environ[\"TRITON_INTERPRET\"] = \"1\"  # before any kernel is defined: @triton.jit then "
                  "makes an interpreted kernel\nimport triton\nimport triton.language as tl\n"
                  "print(cpu_banner() if cpu_mode() else f\"GPU: {torch.cuda.get_device_name()}\")",
                  "`tl.program_id(0)` is CUDA's `blockIdx.x`, `tl.arange(0, BLOCK_SIZE)` every lane's `threadIdx.x` "
                  "at once, and `mask = offs < n`, passed to each `tl.load` and `tl.store`, is the guard. A tensor "
                  "reaches the kernel as a pointer to its first element: `x_ptr + offs` is a block of pointers, one "
                  "per lane. The reference:"),
}
PY_TESTS = (("tiny", "tiny", "handles one element."),
            ("ragged_sizes", "ragged", "handles 7, 257 and 1,023 elements (not multiples of a block)."))
CUDA_TESTS = PY_TESTS + (("large", "large", "handles 1,048,576 elements."),)
MODES = (("memory", "memory", "reads and writes only inside its tensors (a memory check on the ragged sizes)."),
         ("integrity", "integrity", "computes with a kernel of its own, gives the same answer twice and leaves its "
                                    "inputs alone."))
HIDDEN = "handles sizes it has not seen (hidden tests: random sizes, chosen when grading)."
# per kind of rung: its check's suffix, its tests before the hidden one, its modes after it, the exercise's last words
KINDS = {"python": ("", PY_TESTS, (), ""),
         "cuda": ("_cuda", CUDA_TESTS, MODES, " Run the cell after every edit: it compiles `cuda_src` into `module`."),
         "triton": ("_triton", PY_TESTS, MODES, " The kernel's body is about five lines; its launch is "
                                                "`triton.cdiv(n, 256)` programs of 256 lanes.")}
ISOLATED = ("x, y = torch.randn(1000, device=device()), torch.randn(1000, device=device())\n"
            "out = isolated($call)(2.5, x, y)  # in a process of its own: a crash there leaves this one alone\n"
            "print(\"largest difference from the reference:\", float((out.cpu() - $name(2.5, x.cpu(), y.cpu())).abs().max()))")
DEMOS = {"python": "x, y = torch.randn(10), torch.randn(10)\nprint($tested(2.5, x, y) - $name(2.5, x, y))",
         "cuda": ISOLATED.replace("isolated($call)", "isolated(module).$name"),
         "triton": ISOLATED.replace("$call", "$tested")}


def _kind(stem):
    return {"04_L3_cuda": "cuda", TRITON_RUNG: "triton"}.get(stem, "python")


def _lines(text):
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]] if text else []


def _cell(kind, source, stem, index, meta=None):
    cell = {"cell_type": kind, "id": hashlib.sha256(f"{stem}/{index}".encode()).hexdigest()[:8],
            "metadata": meta or {}, "source": _lines(source)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return {k: cell[k] for k in sorted(cell)}


def grade_metadata(grade_id, points=None):
    """nbgrader's metadata of a cell: a graded, locked test cell of these points (points=None: a solution cell)."""
    meta = {"grade": points is not None, "grade_id": grade_id, "locked": points is not None,
            "schema_version": 3, "solution": points is None, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": {k: meta[k] for k in sorted(meta)}}


def notebook(name, stem, seed):
    """One rung's source notebook: goal, imports, the reference, the exercise, a demo and its test cells."""
    fill = lambda text: Template(text).substitute(name=name, NAME=name.upper())  # noqa: E731
    title, goal, imports, reference = HEADS[stem]
    solution, grade_id, tested = (fill(s) for s in SOLUTIONS[stem])
    kind = _kind(stem)
    suffix, tests, modes, advice = KINDS[kind]
    check = f"check_{name}{suffix}"
    prefix = f"{name}_cuda" if kind == "cuda" else tested
    what = name if kind == "cuda" else tested
    cells = [("markdown", f"# {name.upper()}, {title}\n\n**Goal:** {goal}"), ("code", fill(imports)),
             ("markdown", fill(reference)),
             ("code", f"x, y = torch.arange(4.0), torch.ones(4)\n{name}(2.5, x, y)")]
    if kind == "cuda":
        cells.append(("code", f'cpp_src = "torch::Tensor {name}(double a, torch::Tensor x, torch::Tensor y);"'))
    cells += [("markdown", f"### Exercise: `{grade_id}`\n\nFill in the part marked for you; the cells at the end "
                           f"check it.{advice}"),
              ("solution", solution)]
    demo = Template(DEMOS[kind]).substitute(name=name, tested=tested)
    cells += [("demo", demo), ("markdown", "### Checks\n\nEach check says what is wrong and how to fix it. Beyond "
                                           "the sizes you see, the grader tries sizes you cannot (hidden tests).")]
    for test, case, words in tests:
        cells.append(("test", f'"""{what} {words}"""\n{check}({tested}, "{case}")', f"{prefix}_{test}"))
    cells.append(("test", f'"""{what} {HIDDEN}"""\n### BEGIN HIDDEN TESTS\n{check}({tested}, "random", seed={seed})\n'
                          "### END HIDDEN TESTS", f"{prefix}_hidden_sizes"))
    for test, case, words in modes:
        cells.append(("test", f'"""{what} {words}"""\n{check}({tested}, "{case}")', f"{prefix}_{test}"))
    out = []
    for i, (kind, source, *gid) in enumerate(cells):
        if kind == "solution":
            out.append(_cell("code", source, stem, i, grade_metadata(grade_id)))
        elif kind == "test":
            out.append(_cell("code", source, stem, i, grade_metadata(gid[0], 1)))
        elif kind == "demo":
            out.append(_cell("code", source, stem, i, {"tags": ["demo"]}))
        else:
            out.append(_cell(kind, source, stem, i))
    return {"cells": out, "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                                      "name": "python3"}, "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def _answers(name, stems):
    """{grade_id: the whole solution cell with the solution in it} for the rungs generated."""
    out = {}
    for stem in stems:
        solution, grade_id, _ = (Template(s).substitute(name=name) for s in SOLUTIONS[stem])
        marker = r"[ \t]*(### |// )(BEGIN|END) SOLUTION\n"
        out[grade_id] = re.sub(marker, "", solution) + "\n"
    return out


def _wrong(answer):
    forgets_y = answer.replace("out[i] = a*x[i] + y[i]", "out[i] = a*x[i]")
    return forgets_y.replace("a*x + y, mask", "a*x, mask")  # Triton's store


STORE = "tl.store(out_ptr + offs, a*x + y, mask=mask)"
LAUNCH = "${name}_kernel[(triton.cdiv(n, 256),)](x, y, out, a, n, BLOCK_SIZE=256)"
BODY = f"""    pid = tl.program_id(0)
    offs = pid*BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    {STORE}"""
# The Triton rung's corpus answers beyond right_ and forgets_y_ (enough for the corpus's least, tests/test_corpus.py):
# (folder, what, the verdicts as cases.py spells them (None: every test passes), the edits of the solution that make it)
TRITON_CORPUS = (
    ("triton_store_unmasked", "masked loads, unmasked tl.store: the idle lanes of the last program write past out",
     '{"memory": OUTSIDE}', [(STORE, "tl.store(out_ptr + offs, a*x + y)")]),
    ("triton_mask_off_by_one", "mask = offs <= n: lane n reads x[n] and y[n] and writes out[n], one element past each",
     '{"memory": OUTSIDE}', [("mask = offs < n", "mask = offs <= n")]),
    ("triton_floor_grid", "n // 256 programs instead of triton.cdiv(n, 256): the last n % 256 elements get no lane "
     "(one element: no program at all)", "every(TRITON, WRONG)", [("triton.cdiv(n, 256)", "n // 256")]),
    ("triton_no_program_offset", "offs = tl.arange(0, BLOCK_SIZE), without pid*BLOCK_SIZE: every program writes "
     "elements 0 to 255, so only sizes up to 256 pass (tiny, and hidden sizes for almost no seed)",
     'every(TRITON, WRONG, but=("tiny",))', [("offs = pid*BLOCK_SIZE + tl.arange", "offs = tl.arange")]),
    ("triton_grid_for_other_block", "programs of 128 lanes on a grid of triton.cdiv(n, 256): half the lanes the grid "
     "needs, so only sizes up to 128 pass (tiny)", 'every(TRITON, WRONG, but=("tiny",))',
     [("BLOCK_SIZE=256)", "BLOCK_SIZE=128)")]),
    ("triton_writes_nothing", "computes a*x + y and never calls tl.store: no element is written",
     "every(TRITON, WRONG)", [(STORE, "res = a*x + y  # computed, never stored")]),
    ("triton_updates_y", "stores a*x + y into y too, in place as BLAS's saxpy does: right values, changed input",
     "every(TRITON, INPUT)", [(STORE, f"tl.store(y_ptr + offs, a*x + y, mask=mask)\n    {STORE}")]),
    ("triton_float64_output", "out created as float64 (tl.store converts what it stores): right values, wrong dtype",
     'every(TRITON, "dtype")', [("torch.empty_like(x)", "torch.empty_like(x, dtype=torch.float64)")]),
    ("triton_torch_beside_dummy", "launches its kernel on 0 elements for show and computes a*x + y with PyTorch",
     '{"integrity": "PyTorch operation"}',
     [(LAUNCH, "${name}_kernel[(1,)](x, y, out, a, 0, BLOCK_SIZE=256)  # launched, so it counts\n    out = a*x + y")]),
    ("triton_right_block_1024_grid_lambda", "right: BLOCK_SIZE=1024, the grid a lambda of the meta-parameters", None,
     [(LAUNCH, 'grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)\n    '
               "${name}_kernel[grid](x, y, out, a, n, BLOCK_SIZE=1024)")]),
    ("triton_right_loop_over_blocks", "right: at most 8 programs, each looping over every 8th block of 128 "
     "(tl.num_programs as the stride)", None,
     [(BODY, "    step = tl.num_programs(0)*BLOCK_SIZE\n    for start in range(tl.program_id(0)*BLOCK_SIZE, n, step):\n"
             + "\n".join("    " + line for line in BODY.replace("pid*BLOCK_SIZE", "start").split("\n")[1:])),
      (LAUNCH, "${name}_kernel[(min(8, triton.cdiv(n, 128)),)](x, y, out, a, n, BLOCK_SIZE=128)")]),
    ("triton_right_constant_block_other", "right: programs of BLOCK = 64 lanes, a module constant; masked loads with "
     "other=0.0", None, [("@triton.jit\n", "BLOCK = 64\n\n@triton.jit\n"),
                         ("offs, mask=mask)", "offs, mask=mask, other=0.0)"),
                         (LAUNCH, "${name}_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, a, n, BLOCK_SIZE=BLOCK)")]),
)


def _edited(text, edits):
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


CORPUS = '''"""The corpus of $name (written by `course new $name`): known-right and known-wrong answers and the verdicts each
must get (tests/test_corpus.py runs them). Add your students' real mistakes: the corpus test names how many more
answers of each kind it asks for."""
from tests.corpus.answers import Case, every, tests_of

WRONG = "elements are wrong"$triton_phrases

CASES = {
$cases}
'''


def scaffold(root, name, rungs=4, triton=False):
    """Writes a new assignment NAME whole (triton: with the Triton rung after CUDA C); returns the files written.
    CourseError (and nothing written) if it exists."""
    root = course_root(root)
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise CourseError(f"{name!r} cannot name an assignment: use lower-case letters, digits and _, starting with "
                          "a letter (it names the functions and checks, e.g. check_" + "<name>)")
    if not 1 <= rungs <= len(RUNGS):
        raise CourseError(f"--rungs is 1 to {len(RUNGS)} (L0 loop, L1 run_kernel, L2 blk_kernel, L3 CUDA C)")
    if triton and rungs < len(RUNGS):
        raise CourseError(f"--triton adds the Triton rung after CUDA C, whose kernel its lesson translates: it needs "
                          f"all {len(RUNGS)} rungs (leave out --rungs {rungs})")
    package = root / "course"
    if package.resolve() != PACKAGE:
        raise CourseError(f"course new writes the topic into {package}/topics/, but Python imports course from "
                          f"{PACKAGE}: run it in the course folder whose package is the one installed (pip install -e .)")
    stems = RUNGS[:rungs] + ((TRITON_RUNG,) if triton else ())
    answers = _answers(name, stems)
    fill = lambda text: Template(text).substitute(name=name, NAME=name.upper())  # noqa: E731
    pieces = {k: fill(v) if triton else "" for k, v in TRITON_TOPIC.items()}
    files = {root / "course" / "topics" / f"{name}.py": Template(TOPIC).substitute(name=name, NAME=name.upper(),
                                                                                   Title=name.upper(), **pieces)}
    for k, stem in enumerate(stems):
        nb = notebook(name, stem, seed=1000 * (k + 4) + 17 * len(name))
        files[root / "source" / name / f"{stem}.ipynb"] = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    students = {"alice": answers, "bob": {g: _wrong(a) if g.endswith("_py") else a for g, a in answers.items()}}
    for student, theirs in students.items():
        for grade_id, text in theirs.items():
            files[root / "examples" / name / student / f"{grade_id}.py"] = text
    bob_loses = [f"{RUNGS[0]}/{name}_py_{test}" for test, _, _ in PY_TESTS] + [f"{RUNGS[0]}/{name}_py_hidden_sizes"]
    files[root / "examples" / name / "expected.json"] = json.dumps({"alice": [], "bob": bob_loses}, indent=1) + "\n"
    files[root / "examples" / name / "README.md"] = (
        "# Example submissions\n\nEach folder is a student; each `<grade_id>.py` is what they left in that solution "
        "cell (`make grade` grades them); expected.json lists the tests each must lose (tests/test_pipeline.py)."
        "\n\n| student | what they submitted | marks it deserves |\n|---|---|---|\n"
        "| alice | the solutions | full marks |\n"
        f"| bob | L0 forgets `+ y[i]`; the other rungs right | every test but L0's |\n")
    cases = ""
    for grade_id, text in answers.items():
        files[root / "tests" / "corpus" / name / f"right_{grade_id}" / f"{grade_id}.py"] = text
        files[root / "tests" / "corpus" / name / f"forgets_y_{grade_id}" / f"{grade_id}.py"] = _wrong(text)
        cases += (f'    "right_{grade_id}": Case("{grade_id}", "right: {grade_id}, as the notebook\'s solution"),\n'
                  f'    "forgets_y_{grade_id}": Case("{grade_id}", "{grade_id} computes a*x[i], forgetting + y[i]",\n'
                  f'                                every(tests_of("{name}", "{grade_id}"), WRONG)),\n')
    for folder, what, verdicts, edits in TRITON_CORPUS if triton else ():
        text = _edited(answers[f"{name}_triton"], [(fill(old), fill(new)) for old, new in edits])
        files[root / "tests" / "corpus" / name / folder / f"{name}_triton.py"] = text
        verdicts = f",\n{' ' * 8}{verdicts}" if verdicts else ""
        cases += f'    "{folder}": Case("{name}_triton", "{what}"{verdicts}),\n'
    phrases = (f'\nTRITON = tests_of("{name}", "{name}_triton")\nOUTSIDE = "found an access outside a tensor"  # the '
               'Triton memory check\'s words\nINPUT = "changed its input"' if triton else "")
    files[root / "tests" / "corpus" / name / "cases.py"] = Template(CORPUS).substitute(name=name, cases=cases,
                                                                                       triton_phrases=phrases)
    taken = [p for p in (root / "source" / name, root / "examples" / name, root / "tests" / "corpus" / name,
                         root / "course" / "topics" / f"{name}.py") if p.exists()]
    if taken:
        raise CourseError(f"assignment {name} exists already: {', '.join(str(p.relative_to(root)) for p in taken)}")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return sorted(files)

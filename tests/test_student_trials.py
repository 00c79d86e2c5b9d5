"""The student-trial corpus: what a new student reads after each mistake of the trials (issue 38), phrase by phrase.

The Triton trials (tests/trials/triton.py) are the lessons' own solution cells with one mistake each, run as the
notebook runs them: the lesson's first cell, the changed solution cell, then the cell that showed the message (a
check, the isolated(...) demo or a direct call), in CPU mode here (Triton's interpreter) and on a GPU once. A
failed notebook cell's leftovers are tried through IPython itself (a shell of its own). The CUDA rung's trials are
those of tests/test_messages.py and tests/test_messages_matmul.py, run here too so that this file is the whole
corpus of trials (their builds are the same sources, built once).
"""
import io
import json
import linecache
import pdb
import sys

import pytest

import course
from course.harness import cells
from tests import test_messages, test_messages_matmul
from tests.support import ROOT
from tests.test_messages import sources  # noqa: F401 (the CUDA trials' fixture)
from tests.trials.triton import TRIALS

pytestmark = [pytest.mark.xdist_group("messages"), pytest.mark.timeout(1800)]

# The lessons' first cells, as far as a trial needs them (TRITON_INTERPRET is set by the test, as the cell does).
PRELUDE = {
    "grayscale": "import os\nimport torch\nfrom course import device, cpu_mode, photo, rgb2grey, isolated, "
                 "check_rgb2grey_triton\nimport triton\nimport triton.language as tl\n",
    "matmul": "import os\nimport torch\nfrom course import cpu_mode, device, digits, weights, check_matmul_triton, "
              "isolated\nimport triton\nimport triton.language as tl\nx, labels = digits(5)\nw8 = weights()\n",
}
NOTEBOOK = {"grayscale": ("source/grayscale/05_triton.ipynb", "rgb2grey_triton"),
            "matmul": ("source/matmul/06_triton.ipynb", "matmul_triton")}


def solution_cell(lesson):
    """The lesson's solution cell as the instructor wrote it, its solution regions' markers dropped."""
    path, grade_id = NOTEBOOK[lesson]
    cell = next(c for c in json.loads((ROOT / path).read_text())["cells"]
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)
    return "".join(line for line in "".join(cell["source"]).splitlines(True) if "### " not in line)


def run_cell(namespace, source, name):
    """Runs source as a notebook cell: its lines kept where inspect (and @triton.jit) read a cell's source."""
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), namespace)


def what_it_shows(trial, key, capsys):
    """What the student reads after the trial's run cell: what it printed, then the error it raised."""
    ns = {"__name__": "__main__"}
    run_cell(ns, PRELUDE[trial.lesson], f"/trials/{key}/prelude.py")
    cell = solution_cell(trial.lesson)
    for old, new in trial.change:
        assert old in cell, f"{key}: {old!r} is not in the lesson's solution cell"
        cell = cell.replace(old, new)
    run_cell(ns, cell, f"/trials/{key}/cell.py")
    capsys.readouterr()
    try:
        run_cell(ns, trial.run, f"/trials/{key}/run.py")
        raised = ""
    except Exception as e:  # noqa: BLE001 (what the cell shows)
        raised = f"{type(e).__name__}: {e}"
    return capsys.readouterr().out + raised


@pytest.mark.parametrize("key", sorted(TRIALS))
def test_a_triton_mistake_gets_the_message_that_names_its_fix(key, capsys, monkeypatch):
    trial = TRIALS[key]
    gpu = not course.cpu_mode()
    if gpu and trial.cpu_only:
        pytest.skip(trial.cpu_only)
    if not gpu:
        monkeypatch.setenv("TRITON_INTERPRET", "1")  # what the lesson's first cell does in CPU mode
    if trial.stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(trial.stdin))
        monkeypatch.setattr(sys, "breakpointhook", lambda: pdb.Pdb().set_trace(sys._getframe(1)))  # not pytest's
    shown = what_it_shows(trial, key, capsys)
    for phrase in (trial.gpu if gpu and trial.gpu else trial.must):
        choices = phrase if isinstance(phrase, tuple) else (phrase,)
        assert any(c in shown for c in choices), f"{key}: missing {phrase!r} in:\n{shown}"
    for phrase in trial.must_not:
        assert phrase not in shown, f"{key}: the wrong hint {phrase!r} in:\n{shown}"


# ---- a cell that failed after it had worked: its old definitions are not judged ----------------------------------

@pytest.fixture
def shell(monkeypatch):
    """An IPython shell of its own whose cell runs the course watches, as a notebook's kernel does."""
    from IPython.core.interactiveshell import InteractiveShell
    ipython = InteractiveShell.instance()
    monkeypatch.setattr(cells, "_watch", None)
    cells.watch(ipython)
    yield ipython
    ipython.events.unregister("pre_run_cell", cells._watch.pre_run_cell)
    ipython.events.unregister("post_run_cell", cells._watch.post_run_cell)
    InteractiveShell.clear_instance()


def cell_says(ipython, source):
    """Runs a cell; the message of the error it raised, or "" when it ran without one."""
    result = ipython.run_cell(source, store_history=True)
    error = result.error_in_exec or result.error_before_exec
    return f"{type(error).__name__}: {error}" if error else ""


GREY_PY = "def rgb2grey_py(x):\n    r, g, b = x.float()\n    return (0.2989*r + 0.5870*g + 0.1140*b).to(torch.uint8)\n"
STALE = ("the cell that defines {name} failed when it last ran", "does not judge it", "fix the error that cell shows")


@pytest.mark.parametrize("rung, first, broken, check", [
    ("python", GREY_PY, GREY_PY.replace("):", ")", 1), 'check_rgb2grey(rgb2grey_py, "tiny")'),
    ("python, an error before the def", GREY_PY, "undefined_name\n" + GREY_PY, 'check_rgb2grey(rgb2grey_py, "tiny")'),
    ("cuda", 'cuda_src = "__global__ void k() {}"\n', 'cuda_src = "__global__ void k() {}\n',
     'check_rgb2grey_cuda(cuda_src, "tiny")'),
])
def test_a_check_refuses_what_a_failed_cell_left_behind(shell, rung, first, broken, check, capsys):
    name = "cuda_src" if rung == "cuda" else "rgb2grey_py"
    assert cell_says(shell, "import torch\nfrom course import check_rgb2grey, check_rgb2grey_cuda\n") == ""
    assert cell_says(shell, first) == ""
    assert cell_says(shell, broken) != ""
    said = cell_says(shell, check)
    for phrase in STALE:
        assert phrase.format(name=name) in said, said
    if rung.startswith("python"):  # the cell fixed and run again: judged as usual
        assert cell_says(shell, first) == "" and cell_says(shell, check) == ""
        assert "tiny passed" in capsys.readouterr().out


def test_a_triton_launch_function_whose_kernel_cell_failed_is_refused(shell, monkeypatch):
    if course.cpu_mode():
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernel, launch = solution_cell("grayscale").split("def rgb2grey_triton")
    for cell in (PRELUDE["grayscale"], kernel, "def rgb2grey_triton" + launch):
        shell.run_cell(cell, store_history=True)
    assert cell_says(shell, kernel.replace("offs < n", "offs < n)")) != ""  # a typo in the kernel's cell
    said = cell_says(shell, 'check_rgb2grey_triton(rgb2grey_triton, "tiny")')
    assert STALE[0].format(name="rgb2grey_kernel") in said, said


def test_a_cell_that_rebinds_its_names_before_failing_leaves_nothing_stale(shell):
    assert cell_says(shell, "from course import check_rgb2grey\nimport torch\n") == ""
    assert cell_says(shell, GREY_PY) == ""
    assert cell_says(shell, GREY_PY + "raise ValueError('later in the cell')\n") != ""
    assert cell_says(shell, 'check_rgb2grey(rgb2grey_py, "tiny")') == ""


def test_outside_ipython_nothing_is_watched_or_refused():
    assert cells.defined_names("def f(x)\n    pass\nBLOCK, n = 1, 2\nx == 3\n") == {"f", "BLOCK", "n"}
    assert cells.defined_names("@triton.jit\ndef k(x_ptr):\n    pass\nout: int = 3\n") == {"k", "out"}


# ---- the CUDA rung's trials ----------------------------------------------------------------------------------

@pytest.mark.parametrize("key", sorted(test_messages.CUDA))
def test_a_cuda_grayscale_trial(key, sources):  # noqa: F811 (the fixture)
    test_messages.test_a_cuda_mistake_gets_the_message_that_names_its_fix(key, sources)


@pytest.mark.parametrize("key", sorted(test_messages_matmul.CUDA))
def test_a_cuda_matmul_or_drill_trial(key, monkeypatch):
    test_messages_matmul.test_a_cuda_matmul_or_drill_mistake_gets_the_message_that_names_its_fix(key, monkeypatch)

"""release/ is nbgrader's output for source/, kept in step; the CUDA exercise's stub is C, so it compiles."""
import filecmp
import shutil

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from course.grading.nbgrader.release import C_STUB, ClearCudaSolutions
from tests.support import ROOT, nbgrader

ASSIGNMENTS = sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def regenerated(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "source", course / "source")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    for a in ASSIGNMENTS:
        proc = nbgrader("generate_assignment", a, "--force", cwd=course)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return course / "release"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_up_to_date(regenerated, assignment):
    fresh, committed = regenerated / assignment, ROOT / "release" / assignment
    names = sorted(p.name for p in fresh.glob("*.ipynb"))
    assert names == sorted(p.name for p in committed.glob("*.ipynb")), "run `make release` and commit release/"
    stale = [n for n in names if not filecmp.cmp(fresh / n, committed / n, shallow=False)]
    assert not stale, f"release/{assignment}/{stale} differ from what source/ generates: run `make release`"


def test_released_cuda_source_has_a_c_stub_and_no_solution(regenerated):
    nb = nbformat.read(regenerated / "grayscale" / "04_L3_cuda.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "rgb_to_grayscale_cuda")
    assert cell.source.count(C_STUB) == 2
    assert "NotImplementedError" not in cell.source
    assert "blockIdx" not in cell.source and "<<<" not in cell.source


def test_released_python_exercises_get_the_python_stub(regenerated):
    nb = nbformat.read(regenerated / "grayscale" / "01_L0_loop.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    assert "raise NotImplementedError()" in cell.source and "0.2989" not in cell.source


def clear(source):
    cell = new_code_cell(source)
    pre = ClearCudaSolutions(code_stub={"python": "# YOUR CODE HERE\nraise NotImplementedError()"})
    replaced = pre._replace_solution_region(cell, "python")
    return replaced, cell.source


def test_c_regions_get_a_c_comment_and_python_regions_python():
    replaced, text = clear('src = r"""\n  // BEGIN SOLUTION\n  int i = 0;\n  // END SOLUTION\n"""\n'
                           'def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION')
    assert replaced
    assert text == ('src = r"""\n  // YOUR CODE HERE\n"""\n'
                    'def f():\n    # YOUR CODE HERE\n    raise NotImplementedError()')


def test_unclosed_c_region_is_an_error():
    with pytest.raises(RuntimeError, match="no end solution"):
        clear('x = r"""\n// BEGIN SOLUTION\nint i;\n"""')


def hidden_test_cells(folder):
    """(source cell, released cell) of every test cell with hidden tests, over the grayscale lessons."""
    for path in sorted((ROOT / "source" / "grayscale").glob("*.ipynb")):
        source = nbformat.read(path, as_version=4)
        released = {c.metadata.get("nbgrader", {}).get("grade_id"): c
                    for c in nbformat.read(folder / path.name, as_version=4).cells}
        for cell in source.cells:
            if "BEGIN HIDDEN TESTS" in cell.source:
                yield cell, released[cell.metadata["nbgrader"]["grade_id"]]


def test_a_released_hidden_test_cell_shows_nothing_and_reads_as_unedited(regenerated):
    import ast

    from course.grading.nbgrader.release import HIDDEN_NOTE, ClearHiddenTestsQuietly
    pairs = list(hidden_test_cells(regenerated / "grayscale"))
    assert len(pairs) == 5  # one a lesson: L0 to L3 and Triton
    for source, released in pairs:
        # no Out[] (validate would read the docstring as a score): the last statement is not an expression
        assert released.source.endswith(HIDDEN_NOTE) and "check_" not in released.source
        assert not isinstance(ast.parse(released.source).body[-1], ast.Expr)
        # what autograde's RestoreHiddenTests compares a submitted cell with: the source cell, cut the same way
        cut = nbformat.from_dict({"cell_type": "code", "source": source.source, "metadata": {}})
        assert ClearHiddenTestsQuietly()._remove_hidden_test_region(cut) and cut.source == released.source


def test_a_cell_with_code_left_after_its_hidden_tests_is_left_alone():
    from course.grading.nbgrader.release import ClearHiddenTestsQuietly
    cell = new_code_cell('"""doc"""\ncheck(1)\n### BEGIN HIDDEN TESTS\ncheck(2)\n### END HIDDEN TESTS')
    assert ClearHiddenTestsQuietly()._remove_hidden_test_region(cell)
    assert cell.source == '"""doc"""\ncheck(1)'


def test_validate_wraps_a_long_hint_instead_of_cutting_it():
    from nbgrader.validator import Validator

    from course.grading.nbgrader.release import wrap_validate_lines
    wrap_validate_lines()
    hint = "Hint: " + " ".join(f"word{i}" for i in range(60))
    shown = Validator()._indent(f"AssertionError: short\n{hint}")
    assert all(len(line) <= Validator().width - 3 for line in shown.splitlines())
    assert " ".join(shown.split()) == " ".join(f"AssertionError: short\n{hint}".split())
    assert "..." not in shown

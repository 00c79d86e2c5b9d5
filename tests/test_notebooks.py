"""Source notebooks are clean, numbered, and built the way nbgrader and nbval need."""
import json
import re

import pytest

from course.assignments import declared
from tests.support import ROOT

NOTEBOOKS = sorted((ROOT / "source").rglob("*.ipynb"))
STUDENT_FUNCTIONS = {f for a in declared(ROOT) for e in a.exercises().values() for f in e.functions}
GPU_ONLY = ("torch.cuda.", "compute-sanitizer", "nvidia-smi")  # what CPU mode cannot stand in for


def cells(path):
    return json.loads(path.read_text())["cells"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_outputs_or_execution_counts(path):
    dirty = [i for i, c in enumerate(cells(path)) if c["cell_type"] == "code" and (c["outputs"] or c["execution_count"])]
    assert not dirty, f"{path.name}: cells {dirty} have outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_opens_with_a_title_and_a_goal(path):
    first = "".join(cells(path)[0]["source"])
    assert first.startswith("# ") and "**Goal:**" in first
    assert path.name[:3].rstrip("_").isdigit()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_test_cells_are_locked_have_points_a_docstring_and_one_call(path):
    for c in cells(path):
        meta = c["metadata"].get("nbgrader", {})
        if not meta.get("grade") or meta.get("solution"):
            continue  # not a test cell (a manually graded answer is graded and a solution: see below)
        src = [line for line in "".join(c["source"]).strip().splitlines() if "HIDDEN TESTS" not in line]
        assert meta["locked"] and meta["points"] > 0, meta["grade_id"]
        assert src[0].startswith('"""') and src[0].endswith('"""'), meta["grade_id"]
        assert len(src) == 2 and src[1].startswith("check_"), meta["grade_id"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_speed_test_cell_leaves_no_result_nbgrader_would_read_as_its_score(path):
    for c in cells(path):
        meta = c["metadata"].get("nbgrader", {})
        call = "".join(c["source"]).strip().splitlines()[-1].split("#")[0].rstrip()
        if meta.get("grade") and not meta.get("solution") and '"speed")' in call:
            # the check returns its Score: as an Out[] `nbgrader validate` warns it "cannot be converted to a float"
            assert call.endswith(";"), f"{meta['grade_id']}: end the speed test's call with ;"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_manually_graded_answers_are_open_markdown_with_a_rubric_the_release_leaves_out(path):
    # nbgrader's manual grading: the student writes in the cell; the instructor's copy holds a model answer and
    # a rubric inside the solution region, which the release replaces with "YOUR ANSWER HERE".
    for c in cells(path):
        meta = c["metadata"].get("nbgrader", {})
        if not (meta.get("grade") and meta.get("solution")):
            continue
        src = "".join(c["source"])
        assert c["cell_type"] == "markdown", f"{meta['grade_id']}: a written answer is a markdown cell"
        assert not meta["locked"] and meta["points"] > 0, meta["grade_id"]
        assert src.startswith("### BEGIN SOLUTION") and src.rstrip().endswith("### END SOLUTION"), meta["grade_id"]
        assert "Rubric" in src, f"{meta['grade_id']}: the instructor's copy needs a rubric"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_only_cells_that_need_a_real_gpu_are_tagged_gpu(path):
    # Everything else runs in CPU mode without a GPU, so nbval runs it in CI.
    for c in cells(path):
        src = "".join(c["source"])
        code = [line for line in src.splitlines() if not line.lstrip().startswith(("#", "print("))]
        needs_gpu = c["cell_type"] == "code" and any(call in line for line in code for call in GPU_ONLY)
        assert needs_gpu == ("gpu" in c["metadata"].get("tags", [])), src[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_gpu_cell_asks_on_gpu_so_cpu_mode_prints_why_it_does_not_run(path):
    # A student in CPU mode still runs these cells (nbval skips them): one line, not a traceback.
    for c in cells(path):
        tags = c["metadata"].get("tags", [])
        if "gpu" in tags:
            assert re.search(r"^if on_gpu\(\"", "".join(c["source"]), re.M), "".join(c["source"])[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_that_call_the_students_function_outside_checks_are_tagged_demo(path):
    # `course verify` skips them: a hang or crash there must not stop the clean re-run.
    # the students' functions, as the solution cells declare them (a compiled module's are the next test's)
    student_call = re.compile(r"(?<![\w.:])(" + "|".join(sorted(STUDENT_FUNCTIONS)) + r")\(")
    for c in cells(path):
        meta = c["metadata"].get("nbgrader", {})
        code = re.sub(r'(?s)r?("""|\'\'\'|"|\').*?\1', "''", "".join(c["source"]))  # calls, not strings of C
        if c["cell_type"] == "code" and not meta and student_call.search(code):
            assert "demo" in c["metadata"].get("tags", []), "".join(c["source"])[:80]


def test_grade_ids_are_unique_across_the_course():
    ids = [c["metadata"]["nbgrader"]["grade_id"] for p in NOTEBOOKS for c in cells(p) if "nbgrader" in c["metadata"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_that_run_a_students_compiled_kernel_run_it_in_a_process_of_its_own(path):
    # A kernel with a bug takes down the process that runs it: a cell calls it (or times it: cuda_time times an
    # isolated function in its process) through isolated(module), so a crash fails that cell and the notebook goes
    # on. Code in strings runs in a child already (run_in_child).
    call = re.compile(r"(?<![\w.])(module|sum_module|max_module|tiled|fma)\.\w+\(|cuda_time\((module|tiled)\.")
    for c in cells(path):
        code = re.sub(r'(?s)r?("""|\'\'\'|"|\').*?\1', "''", "".join(c["source"]))
        if c["cell_type"] == "code":
            assert not call.search(code), "".join(c["source"])[:200]

"""The instructor's pipeline end to end: release, the example submissions, autograde, the grade table.

On a machine without a GPU the CUDA tests must fail saying so (never pass); on a GPU host they grade.
"""
import shutil
from pathlib import Path

import nbformat
import pytest

from course import has_gpu
from course.gradebook import grade_table, grades
from course.submissions import write_submissions
from tests.test_release import ROOT, nbgrader

L0, L1, L2, L3 = "01_L0_loop", "02_L1_run_kernel", "03_L2_blk_kernel", "04_L3_cuda"
PY_TESTS = ("tiny", "ragged_sizes", "tall_and_wide", "photo")
CUDA_TESTS = ("tiny", "ragged_sizes", "tall_and_wide", "photo", "large")
PREFIX = {L0: "rgb2grey_py", L1: "rgb2grey_pyk", L2: "rgb2grey_pybk", L3: "rgb_to_grayscale_cuda"}


def passed(nb, *tests):
    return {(nb, f"{PREFIX[nb]}_{t}") for t in tests}


# What each example student's mistakes cost them (examples/README.md explains each one).
ON_GPU = has_gpu()
EXPECTED_PASSES = {
    "alice": passed(L0, *PY_TESTS) | passed(L1, *PY_TESTS) | passed(L2, *PY_TESTS)
    | (passed(L3, *CUDA_TESTS) if ON_GPU else set()),
    # 0.299 for red tips the 1x1 case's single pixel the right way only; the missing guard
    # leaves only the photo, whose 19,200 pixels fill 75 blocks exactly; n / threads blocks
    # cover all pixels of the photo (1,200 blocks) and none of the other cases.
    "bob": passed(L0, "tiny") | passed(L1, *PY_TESTS) | passed(L2, "photo")
    | (passed(L3, "photo") if ON_GPU else set()),
    "carol": set(),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    for name in ("source", "examples"):
        shutil.copytree(ROOT / name, course / name)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    proc = nbgrader("generate_assignment", "grayscale", "--force", cwd=course)
    assert proc.returncode == 0, proc.stderr
    students = write_submissions(course / "examples", course / "release", course / "submitted", "grayscale")
    assert students == ["alice", "bob", "carol"]
    proc = nbgrader("autograde", "grayscale", "--create", "--force", cwd=course)
    assert proc.returncode == 0, proc.stderr
    assert "ERROR" not in proc.stderr, proc.stderr
    return course


def outputs(course, student, notebook, grade_id):
    nb = nbformat.read(course / "autograded" / student / "grayscale" / f"{notebook}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(o.get("evalue", "") + o.get("text", "") for o in cell.outputs)


@pytest.mark.parametrize("student", sorted(EXPECTED_PASSES))
def test_each_student_gets_the_marks_their_answers_deserve(graded, student):
    table = grades(f"sqlite:///{graded / 'gradebook.db'}", "grayscale", graded / "release")
    assert len(table) == 4 * 3 + 5
    got = {key for key, row in table.items() if row[student][0] == row[student][1]}
    partial = {key for key, row in table.items() if 0 < row[student][0] < row[student][1]}
    assert not partial
    assert got == EXPECTED_PASSES[student]


def test_without_a_gpu_cuda_tests_fail_saying_so(graded):
    if ON_GPU:
        pytest.skip("this machine has a GPU")
    for t in CUDA_TESTS:
        assert "needs an NVIDIA GPU" in outputs(graded, "alice", L3, f"rgb_to_grayscale_cuda_{t}")


def test_the_released_stub_compiles_and_its_tests_fail(graded):
    # carol submitted the release as it is: the compile cell ran and left no error.
    nb = nbformat.read(graded / "autograded" / "carol" / "grayscale" / f"{L3}.ipynb", as_version=4)
    compile_cell = next(c for c in nb.cells if "load_cuda(cuda_src" in c.source)
    assert not [o for o in compile_cell.outputs if o.output_type == "error"]
    if ON_GPU:
        assert "never written" in outputs(graded, "carol", L3, "rgb_to_grayscale_cuda_photo")


def test_bobs_messages_name_his_mistakes(graded):
    assert "IndexError" in outputs(graded, "bob", L2, "rgb2grey_pybk_tiny")
    assert "check the weights" in outputs(graded, "bob", L0, "rgb2grey_py_photo")
    if ON_GPU:
        assert "never written" in outputs(graded, "bob", L3, "rgb_to_grayscale_cuda_ragged_sizes")
        assert "impossible grid" in outputs(graded, "bob", L3, "rgb_to_grayscale_cuda_tiny")


def test_grade_table_lists_every_exercise_and_a_total(graded):
    text = grade_table(f"sqlite:///{graded / 'gradebook.db'}", "grayscale", graded / "release")
    lines = text.splitlines()
    assert lines[0].split() == ["exercise", "alice", "bob", "carol"]
    assert lines[1].startswith(f"{L0}/rgb2grey_py_tiny")
    assert lines[-1].split()[0] == "total"
    assert lines[-1].split()[3] == "0/20"

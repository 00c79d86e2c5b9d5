"""`course new`: an assignment scaffolded whole releases, grades, gives feedback and exports as generated, and its
notebooks pass nbval. SAXPY (out = a*x + y), whose function takes a scalar, in a course folder of its own (the
scaffold writes its topic module into the course package, so that folder holds a copy of the package). With --triton
it also releases, grades its examples with the Triton rung's and passes `course check`."""
import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from course.grading.run.gradebook import grades
from course.grading.commands.examples import write_submissions
from tests.support import ROOT

pytestmark = [pytest.mark.xdist_group("scaffold"), pytest.mark.timeout(1800)]
RUNGS = ("01_L0_loop", "02_L1_run_kernel", "03_L2_blk_kernel", "04_L3_cuda")


def course(folder, *args, check=True):
    """Runs `python -m course ARGS` in folder, with folder's copy of the package imported."""
    proc = subprocess.run([sys.executable, "-m", *args], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(folder)})
    assert not check or proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def scaffolded(tmp_path_factory, *options):
    """(folder, what `course new saxpy OPTIONS` said, the files it wrote) in a course folder of its own."""
    folder = tmp_path_factory.mktemp("scaffold")
    shutil.copytree(ROOT / "course", folder / "course", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "nbgrader_config.py", folder)
    before = {p for p in folder.rglob("*") if p.is_file()}
    proc = course(folder, "course", "new", "saxpy", *options)
    written = {p for p in folder.rglob("*") if p.is_file()} - before
    return folder, proc.stdout, written


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def saxpy(tmp_path_factory):
    return scaffolded(tmp_path_factory)


@pytest.fixture(scope="session")
def saxpy_triton(tmp_path_factory):
    return scaffolded(tmp_path_factory, "--triton")


def test_course_new_writes_notebooks_topic_examples_and_corpus(saxpy):
    folder, said, written = saxpy
    names = {str(p.relative_to(folder)) for p in written}
    assert {f"source/saxpy/{r}.ipynb" for r in RUNGS} | {"course/topics/saxpy.py", "tests/corpus/saxpy/cases.py",
                                                          "examples/saxpy/alice/saxpy_cuda.py"} <= names
    assert f"wrote {len(written)} files" in said and len(written) == 24
    again = course(folder, "course", "new", "saxpy", check=False)
    assert again.returncode == 2 and "exists already: source/saxpy" in again.stderr
    bad = course(folder, "course", "new", "Soft-Max", check=False)
    assert bad.returncode == 2 and "cannot name an assignment" in bad.stderr


def test_the_scaffold_releases_grades_a_right_and_a_wrong_student_gives_feedback_and_exports(saxpy):
    folder, _, _ = saxpy
    said = course(folder, "course", "release", "saxpy").stdout
    assert "04_L3_cuda: 1 CUDA source compiles as released" in said
    assert sorted(write_submissions(folder / "examples", folder / "release", folder / "submitted", "saxpy")) == \
        ["alice", "bob"]
    course(folder, "course", "grade", "saxpy", "--workers", "2")
    table = grades(f"sqlite:///{folder / 'gradebook.db'}", "saxpy", folder / "release")
    assert len(table) == 3 * 3 + 6
    lost = {s: {key for key, row in table.items() if row[s][0] < row[s][1]} for s in ("alice", "bob")}
    assert lost["alice"] == set()
    assert lost["bob"] == {("01_L0_loop", f"saxpy_py_{t}") for t in ("tiny", "ragged_sizes", "hidden_sizes")}
    declared = json.loads((folder / "examples" / "saxpy" / "expected.json").read_text())  # what test_pipeline checks
    assert {s: {tuple(k.split("/")) for k in keys} for s, keys in declared.items()} == lost
    course(folder, "course", "feedback", "saxpy")
    html = (folder / "feedback" / "bob" / "saxpy" / "01_L0_loop.html").read_text()
    assert "elements are wrong" in html and "a*x[i] + y[i]" in html
    course(folder, "course", "export", "saxpy")
    rows = {r["student"]: r for r in csv.DictReader(open(folder / "exports" / "saxpy-grades.csv"))}
    assert (float(rows["alice"]["total"]), float(rows["bob"]["total"]), float(rows["bob"]["max"])) == (15, 12, 15)


def test_the_scaffolds_notebooks_pass_nbval(saxpy):
    folder, _, _ = saxpy
    proc = course(folder, "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "source/saxpy", check=False)
    assert proc.returncode == 0, proc.stdout[-5000:]


def test_course_check_judges_the_examples_against_expected_json_and_one_answer_with_its_messages(saxpy, tmp_path):
    folder, _, _ = saxpy
    said = course(folder, "course", "check", "saxpy").stdout
    assert "saxpy: declared whole (4 notebooks, 4 exercises)" in said
    assert "example student alice: lost 0 of 15 tests as expected.json says" in said
    assert "example student bob: lost 3 of 15 tests as expected.json says" in said
    assert "no tests/test_corpus.py" in said  # the scaffold's folder holds the package only
    one = course(folder, "course", "check", "saxpy", "--answer", "examples/saxpy/bob/saxpy_py.py", "--case", "tiny",
                 check=False)
    assert one.returncode == 1 and "1 test" in one.stdout and "0 of 1 tests passed" in one.stdout
    assert "saxpy_py tiny:\n  AssertionError: saxpy_py: 1 of 1 elements are wrong" in one.stdout  # the whole message
    notebook = course(folder, "course", "check", "saxpy", "--answer", "source/saxpy/01_L0_loop.ipynb")
    assert "3 of 3 tests passed" in notebook.stdout  # the instructor's solutions, read from a notebook
    renamed = tmp_path / "mine.py"
    renamed.write_text((folder / "examples" / "saxpy" / "alice" / "saxpy_cuda.py").read_text())
    cuda = course(folder, "course", "check", "saxpy", "--answer", str(renamed), "--exercise", "saxpy_cuda")
    assert "6 of 6 tests passed" in cuda.stdout
    for bad, why in ((["--answer", str(renamed)], "holds no answer to an exercise of saxpy"),
                     (["--case", "nope"], "no test nope in"), (["--exercise", "saxpy_py"], "pass --answer too"),
                     (["--answer", "examples/saxpy/bob/saxpy_py.py", "--exercise", "nope"], "no exercise nope")):
        proc = course(folder, "course", "check", "saxpy", *bad, check=False)
        assert proc.returncode == 2 and why in proc.stderr, (bad, proc.stderr)


def test_course_check_fails_where_an_example_loses_other_tests_than_expected_json_says(saxpy, tmp_path):
    folder, _, _ = saxpy
    copy = tmp_path / "course"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__", "release", "submitted", "autograded",
                                                                  "feedback", "gradebook.db", "exports"))
    declared = copy / "examples" / "saxpy" / "expected.json"
    losses = json.loads(declared.read_text())
    losses["bob"] = losses["bob"][:1] + ["04_L3_cuda/saxpy_cuda_memory"]
    declared.write_text(json.dumps(losses))
    proc = course(copy, "course", "check", "saxpy", "--no-corpus", check=False)
    assert proc.returncode == 1
    assert "bob: lost 3 of 15 tests NOT as expected.json says: 01_L0_loop/saxpy_py_hidden_sizes (lost), " \
           "01_L0_loop/saxpy_py_ragged_sizes (lost), 04_L3_cuda/saxpy_cuda_memory (passed)" in proc.stdout
    topic = copy / "course" / "topics" / "saxpy.py"
    topic.write_text(topic.read_text().replace('"check_saxpy", ', ""))  # a check the notebooks call, not exported
    proc = course(copy, "course", "check", "saxpy", check=False)
    assert proc.returncode == 1 and "PROBLEM assignment saxpy is not fully declared" in proc.stdout
    assert "calls check_saxpy, which no topic module exports" in proc.stdout and "example student" not in proc.stdout


def test_course_new_triton_adds_a_triton_rung_that_releases_grades_and_checks(saxpy_triton):
    folder, said, written = saxpy_triton
    names = {str(p.relative_to(folder)) for p in written}
    assert {"source/saxpy/05_L4_triton.ipynb", "examples/saxpy/alice/saxpy_triton.py",
            "examples/saxpy/bob/saxpy_triton.py", "tests/corpus/saxpy/triton_store_unmasked/saxpy_triton.py"} <= names
    assert f"wrote {len(written)} files" in said and len(written) == 24 + 3 + 14
    for bad, why in ((["--rungs", "3"], "--triton adds the Triton rung after CUDA C"), ([], "exists already")):
        proc = course(folder, "course", "new", "saxpy", "--triton", *bad, check=False)
        assert proc.returncode == 2 and why in proc.stderr, (bad, proc.stderr)
    course(folder, "course", "release", "saxpy")
    write_submissions(folder / "examples", folder / "release", folder / "submitted", "saxpy")
    course(folder, "course", "grade", "saxpy", "--workers", "2")
    table = grades(f"sqlite:///{folder / 'gradebook.db'}", "saxpy", folder / "release")
    assert {t for nb, t in table if nb == "05_L4_triton"} == {
        f"saxpy_triton_{t}" for t in ("tiny", "ragged_sizes", "hidden_sizes", "memory", "integrity")}
    lost = {s: {key for key, row in table.items() if row[s][0] < row[s][1]} for s in ("alice", "bob")}
    assert lost == {"alice": set(),
                    "bob": {("01_L0_loop", f"saxpy_py_{t}") for t in ("tiny", "ragged_sizes", "hidden_sizes")}}
    checked = course(folder, "course", "check", "saxpy", "--no-corpus").stdout
    assert "saxpy: declared whole (5 notebooks, 5 exercises)" in checked
    # the CUDA kernel's guard taken out fails the memory check (the wrapper's `if (n > 0)` is host code, not tried)
    assert "saxpy_cuda_memory: the solution with its guard taken out" in checked
    assert "each catches its solution with a guard or a barrier taken out" in checked
    assert "example student alice: lost 0 of 20 tests as expected.json says" in checked
    assert "example student bob: lost 3 of 20 tests as expected.json says" in checked


# ---- course add-test: a test cell without editing JSON

def test_add_test_puts_a_graded_locked_cell_after_its_exercises_tests(tmp_path):
    import nbformat

    from course.assignments import Assignment, notebook_exercises
    from course.grading.run.layout import CourseError
    from course.grading.commands.add_test import add_test
    from tests.support import course_folder
    root = course_folder(tmp_path, released=False)
    nb_path = root / "source" / "grayscale" / "02_L1_run_kernel.ipynb"
    before = nbformat.read(nb_path, as_version=4)
    last = max(i for i, c in enumerate(before.cells) if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith(
        "rgb2grey_pyk_"))
    gid, at = add_test(root, "grayscale", "02_L1_run_kernel", 'check_rgb2grey(rgb2grey_pyk, "tiny")',
                       "rgb2grey_pyk handles a 1x1 image again.", points=2)
    assert (gid, at) == ("rgb2grey_pyk_tiny_2", last + 1)  # "tiny" is taken
    after = nbformat.read(nb_path, as_version=4)
    cell = after.cells[at]
    assert cell.source == '"""rgb2grey_pyk handles a 1x1 image again."""\ncheck_rgb2grey(rgb2grey_pyk, "tiny")'
    assert cell.metadata["nbgrader"] == {"grade": True, "grade_id": gid, "locked": True, "points": 2,
                                         "schema_version": 3, "solution": False, "task": False}
    assert [c.source for i, c in enumerate(after.cells) if i != at] == [c.source for c in before.cells]
    exercise = next(e for e in notebook_exercises(after, "02_L1_run_kernel") if e.grade_id == "rgb2grey_k")
    assert exercise.tests[-1] == "tiny_2"
    assert not Assignment("grayscale", root).release_problems()
    hidden = add_test(root, "grayscale", "02_L1_run_kernel", 'check_rgb2grey(rgb2grey_pyk, "random", seed=77)',
                      "rgb2grey_pyk handles more sizes it has not seen.", test_id="more hidden", hidden=True)
    assert hidden[0] == "rgb2grey_pyk_more_hidden"
    assert "### BEGIN HIDDEN TESTS\ncheck_rgb2grey" in nbformat.read(nb_path, as_version=4).cells[hidden[1]].source
    written = nb_path.read_bytes()
    for call, doc, options, said in [
            ("x = 1\ncheck_rgb2grey(rgb2grey_pyk)", "a doc", {}, "exactly one call"),
            ("check_everything(rgb2grey_pyk)", "a doc", {}, "not a check the course exports"),
            ("check_rgb2grey(not_defined_here)", "a doc", {}, "defines no not_defined_here for the test to check"),
            ('check_rgb2grey(rgb2grey_pyk, "random")', "a doc", {"hidden": True}, "add seed=N"),
            ('check_rgb2grey(rgb2grey_pyk, "tiny")', "", {}, "the docstring says what the test checks")]:
        with pytest.raises(CourseError, match=said):
            add_test(root, "grayscale", "02_L1_run_kernel", call, doc, **options)
    with pytest.raises(CourseError, match="no notebook 09_nope in source/grayscale/"):
        add_test(root, "grayscale", "09_nope", 'check_rgb2grey(rgb2grey_pyk, "tiny")', "a doc")
    assert nb_path.read_bytes() == written  # refused: nothing written

"""An assignment is one declaration (course/assignments.py): what the rest of the course needs is read from it,
and a missing piece is an error that names it."""
import json
import shutil

import pytest

import course
from course.assignments import Assignment, declared, topic_exports, topic_modules
from course.grading.layout import CourseError
from course.grading.publish import release
from course.harness.rungs import ANSWERS
from course.grading.warm import PRELOAD
from conftest import SLOW_FIRST
from tests.test_release import ROOT

ASSIGNMENTS = declared(ROOT)


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda a: a.name)
def test_every_assignment_is_declared_whole(assignment):
    assert not assignment.release_problems() + assignment.repository_problems()


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda a: a.name)
def test_what_the_course_needs_is_derived_from_the_declaration(assignment):
    for check in assignment.checks():
        assert getattr(course, check).answer_kind in ANSWERS, check  # an answer a judge knows how to collect
    assert set(assignment.topics()) <= set(PRELOAD)
    assert f"pipeline-{assignment.name}" in SLOW_FIRST
    assert assignment.exercises() and all(e.tests for e in assignment.exercises().values())


def test_course_exports_what_each_topic_lists_and_nothing_else_from_topics():
    topics = {name for name, where in course._WHERE.items() if where.startswith("topics.")}
    assert topics == set(topic_exports())
    for name, where in topic_exports().items():
        assert getattr(course, name).__module__ == f"course.{where}", name
    assert set(topic_modules()) <= set(PRELOAD)
    assert {f"course.{where}" for where in topic_exports().values()} <= set(topic_modules())
    assert "course.topics.__init__" not in topic_modules()


def _course_with(tmp_path, assignment, notebook, edit):
    """A course folder whose one assignment is a copy of notebook with edit(cell source) applied to each code cell."""
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["source"] = edit("".join(cell["source"]))
    (tmp_path / "source" / assignment).mkdir(parents=True)
    (tmp_path / "source" / assignment / notebook.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return tmp_path


def test_a_check_no_topic_exports_is_refused_at_release_naming_the_topic_module(tmp_path):
    root = _course_with(tmp_path, "softmax", ROOT / "source" / "grayscale" / "01_L0_loop.ipynb",
                        lambda s: s.replace("check_rgb2grey", "check_softmax"))
    with pytest.raises(CourseError) as e:
        release(root, "softmax")
    assert "check_softmax" in str(e.value) and "course/topics/softmax.py" in str(e.value) and "__all__" in str(e.value)
    assert not (root / "release").exists()


def test_a_cpp_src_other_than_the_topics_is_refused_at_release(tmp_path):
    root = _course_with(tmp_path, "grayscale", ROOT / "source" / "grayscale" / "04_L3_cuda.ipynb",
                        lambda s: s.replace("rgb_to_grayscale(torch::Tensor input);", "rgb_to_grayscale(torch::Tensor x);"))
    with pytest.raises(CourseError) as e:
        release(root, "grayscale")
    assert "cpp_src" in str(e.value) and "course/topics/grayscale.py" in str(e.value)


def test_an_assignment_without_examples_or_corpus_is_named_in_the_tests(tmp_path):
    root = _course_with(tmp_path, "grayscale", ROOT / "source" / "grayscale" / "01_L0_loop.ipynb", lambda s: s)
    (root / "examples" / "grayscale" / "alice").mkdir(parents=True)
    (root / "examples" / "grayscale" / "alice" / "rgb2grey_k.py").write_text("")
    problems = "\n".join(Assignment("grayscale", root).repository_problems())
    assert "examples/grayscale/alice: no solution cell is called rgb2grey_k" in problems
    assert "tests/corpus/grayscale/cases.py is missing" in problems
    shutil.rmtree(root / "examples")
    assert "examples/grayscale/ has no example students" in "\n".join(Assignment("grayscale", root).repository_problems())


def test_an_empty_assignment_folder_is_refused(tmp_path):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    (tmp_path / "source" / "softmax").mkdir(parents=True)
    with pytest.raises(CourseError, match="source/softmax/ holds no notebooks"):
        release(tmp_path, "softmax")

"""An assignment is one declaration (course/assignments.py): what the rest of the course needs is read from it,
and a missing piece is an error that names it."""
import importlib.util
import json
import pkgutil
import shutil

import pytest

import course
import course.topics
from course.assignments import Assignment, declared, topic_exports, topic_modules
from course.grading.run.layout import CourseError
from course.grading.commands.release import release
from course.harness.rungs import ANSWERS
from course.grading.warm import PRELOAD
from conftest import SLOW_FIRST
from tests import test_pipeline
from tests.support import ROOT

ASSIGNMENTS = declared(ROOT)


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda a: a.name)
def test_every_assignment_is_declared_whole(assignment):
    assert not assignment.release_problems() + assignment.repository_problems()


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda a: a.name)
def test_what_the_course_needs_is_derived_from_the_declaration(assignment):
    for check in assignment.checks():
        assert getattr(course, check).answer_kind in ANSWERS, check  # an answer a judge knows how to collect
        # the module that defines it, as Python imported it: the warm kernels import it before they fork
        assert getattr(course, check).__module__ in PRELOAD, check
    assert assignment.exercises() and all(e.tests for e in assignment.exercises().values())


def test_course_exports_what_each_topic_lists_and_nothing_else_from_topics():
    topics = {name for name, where in course._WHERE.items() if where.startswith("topics.")}
    assert topics == set(topic_exports())
    for name, where in topic_exports().items():
        assert getattr(course, name).__module__ == f"course.{where}", name
    # the topic modules are the modules Python finds in course/topics/, and the warm kernels can import each preload
    assert set(topic_modules()) == {f"course.topics.{m.name}" for m in pkgutil.iter_modules(course.topics.__path__)}
    assert not [name for name in PRELOAD if importlib.util.find_spec(name) is None]
    assert {f"course.{where}" for where in topic_exports().values()} <= set(topic_modules())
    assert "course.topics.__init__" not in topic_modules()


def xdist_groups(module):
    """The xdist groups a test module marks its tests with: on the module, on a test, on a test's parameters."""
    marks = list(getattr(module, "pytestmark", []))
    for name, test in vars(module).items():
        for mark in getattr(test, "pytestmark", []) if name.startswith("test") else []:
            marks.append(mark)
            if mark.name == "parametrize":
                marks += [m for p in mark.args[1] for m in getattr(p, "marks", ())]  # pytest.param(..., marks=)
    return {m.args[0] if m.args else m.kwargs["name"] for m in marks if m.name == "xdist_group"}


def notebooks_to_grade(assignment):
    """How many notebooks autograding an assignment's examples grades, counted on disk: each example and tampering
    student's (examples/<a>/, tests/tamper/<a>/) of each notebook in source/<a>/."""
    students = [p for where in ("examples", "tests/tamper") for p in (ROOT / where / assignment).glob("*") if p.is_dir()]
    return len(students) * len(list((ROOT / "source" / assignment).glob("*.ipynb")))


def test_the_slow_groups_that_start_first_are_the_groups_the_tests_use():
    pipelines = [g for g in SLOW_FIRST if g.startswith("pipeline-")]
    on_disk = {f"pipeline-{p.name}" for p in (ROOT / "source").iterdir() if p.is_dir()}
    assert set(pipelines) == {g for g in xdist_groups(test_pipeline) if g.startswith("pipeline-")} == on_disk
    counts = [notebooks_to_grade(g.removeprefix("pipeline-")) for g in pipelines]
    assert counts == sorted(counts, reverse=True), dict(zip(pipelines, counts))  # the most to grade first
    marked = "\n".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    assert not [g for g in SLOW_FIRST if g not in pipelines and f'xdist_group("{g}")' not in marked]


def _course_with(tmp_path, assignment, notebook, edit, first=None):
    """A course folder whose one assignment is a copy of notebook with edit(cell source) applied to each code cell
    (and first, a code cell's source, put before them all)."""
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["source"] = edit("".join(cell["source"]))
    if first is not None:
        nb["cells"].insert(0, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                               "source": first})
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


GREY_CPP_SRC = 'cpp_src = "torch::Tensor rgb_to_grayscale(torch::Tensor input);"'  # as 04_L3_cuda writes it
# other ways to write the same declaration (ARG: the argument's name), and a cell put first where one needs it
CPP_SRC_FORMS = {
    "triple-quoted": ('cpp_src = """torch::Tensor rgb_to_grayscale(torch::Tensor ARG);"""', None),
    "parenthesised": ('cpp_src = ("torch::Tensor rgb_to_grayscale("\n           "torch::Tensor ARG);")', None),
    "joined with +": ('cpp_src = "torch::Tensor " + "rgb_to_grayscale(torch::Tensor ARG);"', None),
    "a name bound in an earlier cell": ("cpp_src = declaration", 'declaration = "torch::Tensor rgb_to_grayscale("\n'
                                        '# the argument\ndeclaration += "torch::Tensor ARG);"'),
}


@pytest.mark.parametrize("form", CPP_SRC_FORMS)
def test_cpp_src_is_read_however_it_is_written(tmp_path, form):
    line, first = CPP_SRC_FORMS[form]
    for arg, refused in (("input", False), ("x", True)):
        (tmp_path / arg).mkdir()
        root = _course_with(tmp_path / arg, "grayscale", ROOT / "source" / "grayscale" / "04_L3_cuda.ipynb",
                            lambda s: s.replace(GREY_CPP_SRC, line.replace("ARG", arg)),
                            first and first.replace("ARG", arg))
        problems = [p for p in Assignment("grayscale", root).release_problems() if "cpp_src" in p]
        if refused:
            assert len(problems) == 1 and "rgb_to_grayscale(torch::Tensor x);" in problems[0], problems
            assert "differs from the cpp_src of" in problems[0] and "course/topics/grayscale.py" in problems[0]
        else:
            assert not problems, problems


@pytest.mark.parametrize("line", ['cpp_src = "torch::Tensor rgb_to_grayscale(torch::Tensor %s);" % "input"',
                                  'cpp_src = f"torch::Tensor rgb_to_grayscale(torch::Tensor {0});"'])
def test_a_cpp_src_the_release_cannot_read_is_refused_naming_the_notebook_and_cell(tmp_path, line):
    root = _course_with(tmp_path, "grayscale", ROOT / "source" / "grayscale" / "04_L3_cuda.ipynb",
                        lambda s: s.replace(GREY_CPP_SRC, line))
    with pytest.raises(CourseError) as e:
        release(root, "grayscale")
    assert "source/grayscale/04_L3_cuda cell 5: cpp_src = " in str(e.value), str(e.value)
    assert "is not a string written out in the notebook" in str(e.value)
    assert not (root / "release").exists()


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

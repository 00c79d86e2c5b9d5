"""A grade's fingerprint changes with everything the grade depends on: the whole grading code and the mode."""
import shutil

from course.grading.run import ledger
from course.grading.run.ledger import fingerprint, grading_code_digest
from tests.support import ROOT


def _course(tmp_path):
    """A course folder with one submission, enough for a fingerprint."""
    (tmp_path / "submitted" / "alice" / "grayscale").mkdir(parents=True)
    (tmp_path / "submitted" / "alice" / "grayscale" / "01_L0_loop.ipynb").write_text("{}")
    (tmp_path / "source" / "grayscale").mkdir(parents=True)
    (tmp_path / "nbgrader_config.py").write_text("")
    return tmp_path


def test_a_class_graded_in_cpu_mode_is_graded_again_on_a_gpu(tmp_path):
    root = _course(tmp_path)
    cpu = fingerprint(root, "grayscale", "alice", b"s", "code", "cpu")
    assert cpu != fingerprint(root, "grayscale", "alice", b"s", "code", "gpu")
    assert cpu == fingerprint(root, "grayscale", "alice", b"s", "code", "cpu")


def test_the_code_digest_covers_every_module_of_the_course_package(tmp_path, monkeypatch):
    # the grading plumbing decides verdicts too (grading/nbgrader/trusted.py, the sandbox): a change anywhere in course/ counts
    copy = tmp_path / "course"
    shutil.copytree(ROOT / "course", copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(ledger, "_COURSE", copy)
    before = grading_code_digest()
    for module in ("grading/nbgrader/trusted.py", "device.py", "ladder.py", "harness/child.py"):
        path = copy / module
        path.write_text(path.read_text() + "\n# changed\n")
        after = grading_code_digest()
        assert after != before, f"a change to course/{module} left the fingerprint as it was"
        before = after

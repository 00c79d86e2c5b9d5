"""The feedback a student gets: which test passed or failed and why, never a hidden test's code or seed.

nbgrader's feedback is the autograded notebook as HTML (`course feedback`, commands/feedback.py, runs it). Before it
is rendered, each test cell's hidden region is cut as the release cuts it (so the cell reads as the student saw it),
and each error's traceback keeps only the student's own frames: the cell's call for a visible test, nothing but the
message for a hidden one (its call names the seed), never a frame inside the course package.
"""
import re

from nbgrader.preprocessors import NbGraderPreprocessor

from ...tracebacks import COURSE as _COURSE, install_student_tracebacks, without_course_frames  # noqa: F401
from .release import ClearHiddenTestsQuietly
from ..cell_roles import is_test_cell

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _plain(text):
    return ANSI.sub("", text)


def is_course_frame(entry):
    """True for a traceback entry that shows a frame of the course package (a check's insides, not the student's code)."""
    text = _plain(entry).lstrip()
    if not text.startswith("File "):
        return False
    path = text[5:].split(":", 1)[0].strip()
    return path.startswith(_COURSE + "/") or "/site-packages/course/" in path


def student_traceback(traceback, hidden):
    """An error's traceback entries as the student should see them: no course frames; no code at all for a hidden test."""
    if hidden:  # the cell frame would show the hidden call with its seed: the message alone
        return traceback[-1:]
    return [t for t in traceback if not is_course_frame(t)]


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback step: hidden test code and seeds cut from test cells, course frames cut from tracebacks."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        hidden = False
        if is_test_cell(cell):
            hidden = ClearHiddenTestsQuietly(config=self.config)._remove_hidden_test_region(cell)
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and out.get("traceback"):
                out["traceback"] = student_traceback(list(out["traceback"]), hidden)
        return cell, resources

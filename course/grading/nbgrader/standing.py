"""Feedback's speed line: a student's own time, ratio and percentile in the class on each measured speed test, never
another student's name (the class's figures: reports/leaderboard.py)."""
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from ..cell_roles import is_test_cell
from ..reports.leaderboard import percentile, record_of, records


def standing(figures, class_times):
    """The line a student's feedback adds to a measured speed test: their own figures and percentile, no one else's."""
    base = "".join(f", {figures['ms'] / ms:.2f}x {name}'s" for name, ms in figures.get("baselines", {}).items())
    pct = percentile(class_times, figures["ms"])
    return (f"Your time: {figures['ms']:.4g} ms, {figures['ratio']:.2f}x the course's kernel's{base}. Of the "
            f"{len(class_times)} kernels timed in this class on this test, yours is faster than {pct:.0f}% of the "
            "others.\n")


class SpeedStanding(NbGraderPreprocessor):
    """Feedback step: each measured speed test's cell gains the student's time, ratio and percentile in the class."""

    def preprocess(self, nb, resources):
        meta = resources.get("nbgrader", {})
        self._class = records(Path.cwd(), meta.get("assignment", "")) if meta.get("assignment") else {}
        self._notebook = meta.get("notebook", "")
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        figures = record_of(cell) if is_test_cell(cell) else None
        if figures:
            per_student = self._class.get(f"{self._notebook}/{cell.metadata['nbgrader']['grade_id']}", {})
            times = [f["ms"] for f in per_student.values()] or [figures["ms"]]
            if figures["ms"] not in times:
                times.append(figures["ms"])
            cell.outputs.insert(len(cell.outputs) - 1, nbformat.v4.new_output("stream", name="stdout",
                                                                                text=standing(figures, times)))
        return cell, resources

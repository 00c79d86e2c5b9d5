"""What the class failed: each exercise's pass rate with the commonest message it was failed with (`course export`'s
table, CSV and plot), read from the autograded notebooks."""
import re
from collections import Counter
from pathlib import Path

import nbformat

from ..cell_roles import is_test_cell

_SIZE = re.compile(r"\b\d+x\d+\b")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")


def failure_message(cell):
    """A failed test cell's message as the class sees it: the error's first line and its hint, numbers as N."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            text = (out.get("evalue") or out.get("ename") or "").strip()
            lines = [line.strip() for line in text.splitlines() if line.strip()] or [out.get("ename", "error")]
            first = lines[0] + (" " + lines[1] if lines[0].endswith(":") and len(lines) > 1 else "")
            hint = next((line[5:].strip() for line in lines[1:] if line.startswith("Hint:")), "")
            hint = hint.split("; ")[0].split(". ")[0]
            return _NUMBER.sub("N", _SIZE.sub("NxN", first[:140] + (f" | hint: {hint[:100]}" if hint else "")))
    return None


def messages(root, assignment, students):
    """{(notebook, grade_id): Counter of failure messages} read from the autograded notebooks."""
    found = {}
    for student in students:
        for path in sorted((Path(root) / "autograded" / student / assignment).glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            for cell in nb.cells:
                if is_test_cell(cell):
                    msg = failure_message(cell)
                    if msg:
                        found.setdefault((path.stem, cell.metadata["nbgrader"]["grade_id"]), Counter())[msg] += 1
    return found


def exercise_rows(table, found):
    """[(notebook, grade_id, passed, graded, pass rate, commonest message, its count)] in teaching order."""
    rows = []
    for (nb, gid), per_student in table.items():
        graded = len(per_student)
        passed = sum(1 for score, top in per_student.values() if top and score == top)
        common = found.get((nb, gid), Counter()).most_common(1)
        msg, count = common[0] if common else ("", 0)
        rows.append((nb, gid, passed, graded, passed / graded if graded else 0.0, msg, count))
    return rows


def plot(rows, path, title):
    """A horizontal bar chart of each exercise's pass rate."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{nb}/{gid}" for nb, gid, *_ in rows]
    rates = [100 * r[4] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(rows) + 1.2))
    ax.barh(range(len(rows)), rates, color=["#c0392b" if r < 50 else "#e67e22" if r < 80 else "#27ae60" for r in rates])
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("students who passed (%)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

"""`course export`: the grades as CSV, each exercise's pass rate with the message the class failed it with (table and
plot), and the speed tests' leaderboard (grading/leaderboard.py)."""
import csv
import re
from collections import Counter
from pathlib import Path

import nbformat

from . import leaderboard
from .run.gradebook import grades
from .run.layout import CourseError, course_root, db_path, db_url, require_assignment
from .run.ledger import Ledger
from .cell_roles import is_test_cell

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


def export(root, assignment, out="exports", db=None):
    """Writes <out>/<assignment>-grades.csv, -exercises.csv and -pass-rates.png (and -speed.csv, .html, .png for an
    assignment with speed tests); prints the exercise table."""
    root = course_root(root)
    require_assignment(root, assignment)
    url = db_url(root, db)
    if not db_path(url).exists():
        raise CourseError(f"no gradebook at {db_path(url)}: release and grade first")
    table = grades(url, assignment, root / "release")
    ledger = Ledger(root, assignment).entries()
    students = sorted({s for row in table.values() for s in row} | set(ledger))
    if not students:
        raise CourseError(f"nothing graded in {assignment} yet: run `python -m course grade {assignment}` first")
    out = Path(out) if Path(out).is_absolute() else root / out
    out.mkdir(parents=True, exist_ok=True)
    notebooks = sorted({nb for nb, _ in table})

    with open(out / f"{assignment}-grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "status", *notebooks, "total", "max", "percent", "note"])
        for s in students:
            entry = ledger.get(s, {})
            per_nb, total, top, seen = {nb: 0.0 for nb in notebooks}, 0.0, 0.0, False
            for (nb, _), row in table.items():
                if s in row:
                    seen = True
                    per_nb[nb] += row[s][0]
                    total += row[s][0]
                    top += row[s][1]
            failed = entry.get("status") == "failed"
            status = "failed" if failed else "graded" if seen else "missing"
            note = entry.get("reason", "") if failed else "; ".join(
                f"{nb}: {why}" for nb, why in entry.get("kernel_stopped", {}).items())
            w.writerow([s, status, *(f"{per_nb[nb]:g}" if seen else "" for nb in notebooks),
                        f"{total:g}" if seen else "", f"{top:g}" if seen else "",
                        f"{100 * total / top:.1f}" if seen and top else "", note])

    rows = exercise_rows(table, messages(root, assignment, students))
    with open(out / f"{assignment}-exercises.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["notebook", "test", "passed", "graded", "pass_rate", "commonest_failure", "students_with_it"])
        for nb, gid, passed, graded, rate, msg, count in rows:
            w.writerow([nb, gid, passed, graded, f"{rate:.3f}", msg, count])
    plot(rows, out / f"{assignment}-pass-rates.png", f"{assignment}: pass rate per test ({len(students)} students)")

    width = max(len(f"{nb}/{gid}") for nb, gid, *_ in rows) + 2
    print(f"{'test':<{width}}{'passed':>10}  commonest failure (students)")
    for nb, gid, passed, graded, rate, msg, count in rows:
        print(f"{nb + '/' + gid:<{width}}{f'{passed}/{graded}':>10}  " + (f"{msg} ({count})" if msg else ""))
    print(f"wrote {out}/{assignment}-grades.csv, {assignment}-exercises.csv and {assignment}-pass-rates.png")
    speed = leaderboard.export(root, assignment, out)
    if speed:
        print(f"wrote the speed leaderboard: {', '.join(p.name for p in speed)}")
    return 0

"""`course export`: the grades as CSV, each exercise's pass rate with the message the class failed it with (table and
plot: reports/exercises.py), and the speed tests' leaderboard (reports/leaderboard.py)."""
import csv
from pathlib import Path

from ..reports import leaderboard
from ..reports.exercises import exercise_rows, messages, plot
from ..run.gradebook import grades
from ..run.layout import CourseError, course_root, db_path, db_url, require_assignment
from ..run.ledger import Ledger


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

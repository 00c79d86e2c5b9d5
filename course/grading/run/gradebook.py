"""The grade table an instructor reads after autograding: one row per exercise, one column per student."""
from pathlib import Path

import nbformat

from nbgrader.api import Gradebook, MissingEntry


def _position(release, notebook):
    """grade_id -> index of its cell in the released notebook, to list exercises in teaching order."""
    path = Path(release) / f"{notebook}.ipynb"
    if not path.exists():
        return {}
    cells = nbformat.read(path, as_version=4).cells
    return {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(cells)}


def grades(db_url, assignment, release="release"):
    """{(notebook, grade_id): {student: (score, max_score)}} for one assignment, in teaching order."""
    table = {}
    with Gradebook(db_url) as gb:
        try:
            a = gb.find_assignment(assignment)
        except MissingEntry:
            raise SystemExit(f"{assignment!r} is not in the gradebook {db_url}: "
                             "run `nbgrader generate_assignment` (make release) first") from None
        students = sorted(s.id for s in gb.students)
        for nb in sorted(a.notebooks, key=lambda n: n.name):
            order = _position(Path(release) / assignment, nb.name)
            for cell in sorted(nb.grade_cells, key=lambda c: (order.get(c.name, len(order)), c.name)):
                row = table.setdefault((nb.name, cell.name), {})
                for student in students:
                    try:
                        g = gb.find_grade(cell.name, nb.name, assignment, student)
                    except MissingEntry:
                        continue
                    row[student] = (g.score, g.max_score)
    return table


def grade_table(db_url, assignment, release="release"):
    """The grades as a plain-text table, with a total per student."""
    table = grades(db_url, assignment, release)
    students = sorted({s for row in table.values() for s in row})
    if not students:
        return f"no graded submissions of {assignment!r} yet: run nbgrader autograde first"
    first = max(len(f"{nb}/{gid}") for nb, gid in table) + 2
    width = max(8, *(len(s) + 2 for s in students))
    lines = [f"{'exercise':<{first}}" + "".join(f"{s:>{width}}" for s in students)]
    totals = {s: [0.0, 0.0] for s in students}
    for (nb, gid), row in table.items():
        cells = []
        for s in students:
            if s in row:
                score, top = row[s]
                totals[s][0] += score
                totals[s][1] += top
                cells.append(f"{score:g}/{top:g}")
            else:
                cells.append("-")
        lines.append(f"{nb + '/' + gid:<{first}}" + "".join(f"{c:>{width}}" for c in cells))
    lines.append(f"{'total':<{first}}" + "".join(f"{f'{t[0]:g}/{t[1]:g}':>{width}}" for t in totals.values()))
    return "\n".join(lines)


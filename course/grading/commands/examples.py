"""`course examples`: example submissions, a released notebook with one student's answers in its solution cells (cli.py prints what it wrote, or with --table the grade table)."""
import shutil
from pathlib import Path

import nbformat

from ..cell_roles import solution_ids


def answers_in(folder):
    """A student's answers: {grade_id: cell source}, one `<grade_id>.py` file per solution cell."""
    return {p.stem: p.read_text() for p in sorted(Path(folder).glob("*.py"))}


def fill(nb, answers):
    """Returns a copy of notebook nb with each solution cell named in answers replaced by the answer."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = answers[grade_id].rstrip("\n")
    return nb


def write_submissions(examples, release, submitted, assignment):
    """Writes submitted/<student>/<assignment>/*.ipynb from examples/<assignment>/<student>/ answers; returns the students."""
    notebooks = {p.name: nbformat.read(p, as_version=4)
                 for p in sorted((Path(release) / assignment).glob("*.ipynb"))}
    if not notebooks:
        raise FileNotFoundError(f"no released notebooks in {Path(release) / assignment}: generate the release first")
    known = {gid for nb in notebooks.values() for gid in solution_ids(nb)}
    students = []
    if not (Path(examples) / assignment).is_dir():
        raise FileNotFoundError(f"no example answers for {assignment}: expected a folder {Path(examples) / assignment}")
    for folder in sorted(p for p in (Path(examples) / assignment).iterdir() if p.is_dir()):
        answers = answers_in(folder)
        unknown = sorted(set(answers) - known)
        if unknown:
            raise ValueError(f"{folder}: no solution cell is called {', '.join(unknown)}; "
                             f"the solution cells are {', '.join(sorted(known))}")
        out = Path(submitted) / folder.name / assignment
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for name, nb in notebooks.items():
            nbformat.write(fill(nb, answers), out / name)
        students.append(folder.name)
    return students


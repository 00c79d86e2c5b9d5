"""`course add-test NAME NOTEBOOK CALL --doc ...`: a test cell added to a source notebook, after its exercise's other
tests: a docstring the student reads, one check call, and nbgrader's metadata (graded, locked, points, a grade_id from
the exercise's prefix); refused, and nothing written, where the grader could not run it."""
import re

from ..run.layout import CourseError, course_root, require_assignment
from .new import grade_metadata


def add_test(root, assignment, notebook, call, doc, points=1, test_id=None, hidden=False):
    """Adds a test cell to source/ASSIGNMENT/NOTEBOOK.ipynb: a docstring (doc) and one check call, with nbgrader's
    metadata (graded, locked, points, a grade_id from the exercise's prefix), after its exercise's last test cell.
    Returns (grade_id, the cell's index). CourseError, and nothing written, for a call the grader cannot run."""
    import nbformat
    from ...assignments import notebook_exercises
    from ...harness.cells import defined_names
    from ..cell_roles import check_call, solution_ids
    from ..nbgrader.trusted import the_check
    root = course_root(root)
    require_assignment(root, assignment)
    stem = notebook.removesuffix(".ipynb")
    path = root / "source" / assignment / f"{stem}.ipynb"
    if not path.is_file():
        known = sorted(p.stem for p in (root / "source" / assignment).glob("*.ipynb"))
        raise CourseError(f"no notebook {stem} in source/{assignment}/: its notebooks are {', '.join(known)}")
    if not doc.strip() or '"""' in doc:
        raise CourseError('the docstring says what the test checks, in one sentence without """ (the student reads '
                          "it next to the verdict)")
    try:
        check, arg, args, kwargs = check_call(call)
        the_check(check)
    except ValueError as e:
        raise CourseError(f"{call!r} cannot be a test cell: {e}") from None
    if hidden and "seed" not in kwargs:
        raise CourseError(f"a hidden test draws its inputs from a seed each student gets their own of: add seed=N to "
                          f"the call, e.g. {check}({arg}, \"random\", seed=4021)")
    nb = nbformat.read(path, as_version=4)
    defined = {n for c in nb.cells if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("grade")
               for n in defined_names(c.source)}
    if arg not in defined:
        raise CourseError(f"{stem} defines no {arg} for the test to check: a test cell checks a function the "
                          f"notebook's exercise defines ({', '.join(solution_ids(nb)) or 'none'})")
    with_it = nbformat.from_dict(nb)
    with_it.cells.append(nbformat.v4.new_code_cell(f"{check}({arg})", metadata={"nbgrader": {
        "grade": True, "solution": False, "grade_id": "probe", "points": 1}}))
    owner = [e for e in notebook_exercises(with_it, stem) if "probe" in (e.prefix + t for t in e.tests)]
    if not owner:
        raise CourseError(f"{stem} has no solution cell before the test that defines {arg}: a test cell checks a "
                          f"function the notebook's exercise defines ({', '.join(solution_ids(nb)) or 'none'})")
    exercise = next((e for e in notebook_exercises(nb, stem) if e.grade_id == owner[0].grade_id), None)
    prefix = exercise.prefix if exercise else f"{arg}_"
    taken = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
    base = prefix + re.sub(r"\W+", "_", test_id or next((a for a in args if isinstance(a, str)), "test")).strip("_")
    grade_id = next(g for g in [base] + [f"{base}_{k}" for k in range(2, 100)] if g not in taken)
    body = f"### BEGIN HIDDEN TESTS\n{call.strip()}\n### END HIDDEN TESTS" if hidden else call.strip()
    cell = nbformat.v4.new_code_cell(f'"""{doc.strip()}"""\n{body}', metadata=grade_metadata(grade_id, points))
    ids = {f"{prefix}{t}" for t in exercise.tests} if exercise else set()
    tests_at = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") in ids]
    if tests_at:
        at = tests_at[-1] + 1
    else:  # the first test of its exercise: after the solution and what follows it, before the next heading
        at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == owner[0].grade_id) + 1
        while at < len(nb.cells) and not (nb.cells[at].cell_type == "markdown" and nb.cells[at].source.startswith("#")
                                          or nb.cells[at].metadata.get("nbgrader", {}).get("solution")):
            at += 1
    nb.cells.insert(at, cell)
    nbformat.write(nb, path)
    return grade_id, at

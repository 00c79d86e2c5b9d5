"""`course verify`: graded submissions re-run in clean processes (course/grading/run/verify.py), each with the student's own hidden cases."""
from ..run.layout import CourseError, course_root, require_assignment
from ..nbgrader.seeds import load_secret
from ..run.verify import default_workers, disagreement_line, disagreements, verify


def reverify(root, assignment, students=None, workers=None):
    """Re-runs the graded students' notebooks and prints every test whose verdict differs; 1 if any does."""
    root = course_root(root)
    require_assignment(root, assignment)
    graded = sorted(p.parent.name for p in (root / "autograded").glob(f"*/{assignment}") if p.is_dir())
    if students:
        missing = sorted(set(students) - set(graded))
        if missing:
            raise CourseError(f"{', '.join(missing)}: nothing graded of {assignment} to re-run")
        graded = [s for s in graded if s in students]
    if not graded:
        raise CourseError(f"nothing graded of {assignment}: run `python -m course grade {assignment}` first")
    rows = verify(assignment, root, students=graded, workers=workers or default_workers(), secret=load_secret(root))
    bad = disagreements(rows)
    print(f"{len(rows)} tests re-run in clean processes; {len(bad)} disagree with the autograded notebooks")
    for row in bad:
        print(f"  {disagreement_line(row)}")
    return 1 if bad else 0

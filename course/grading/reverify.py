"""`course verify`: graded submissions re-run in clean processes (course/grading/verify.py), each with the student's own hidden cases."""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from .layout import CourseError, course_root, require_assignment
from .seeds import load_secret
from .verify import disagreements


def reverify(root, assignment, students=None, workers=None):
    """Re-runs the graded students' notebooks and prints every test whose verdict differs; 1 if any does."""
    from .worker import verify_student
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
    secret = load_secret(root)
    workers = workers or max(1, (os.cpu_count() or 2) // 2)

    def one(student):
        rows = verify_student(root, assignment, student, secret)
        print(f"verified {student}", file=sys.stderr, flush=True)
        return rows

    with ThreadPoolExecutor(workers) as pool:
        rows = [r for rs in pool.map(one, graded) for r in rs]
    bad = disagreements(rows)
    print(f"{len(rows)} tests re-run in clean processes; {len(bad)} disagree with the autograded notebooks")
    for student, nb, grade_id, graded_ok, rerun, message in bad:
        print(f"  {student}  {nb}/{grade_id}: notebook {'passed' if graded_ok else 'failed'}, clean re-run "
              f"{'passed' if rerun else 'failed'}: {message.splitlines()[0] if message else ''}")
    return 1 if bad else 0

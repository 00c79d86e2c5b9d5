"""`course feedback`: feedback/<student>/<assignment>/*.html through nbgrader's generate_feedback, each test with its
verdict and message; hidden tests' code and seeds left out (what the feedback steps cut: nbgrader/feedback.py)."""
from ..run.layout import CourseError, course_root, db_url, require_assignment, run_nbgrader


def feedback(root, assignment, students=None, db=None):
    """Writes feedback/<student>/<assignment>/*.html for the graded students (all, or those named) through nbgrader."""
    root = course_root(root)
    require_assignment(root, assignment)
    graded = sorted(p.parent.name for p in (root / "autograded").glob(f"*/{assignment}") if p.is_dir())
    if not graded:
        raise CourseError(f"no graded submissions of {assignment} in autograded/: run `python -m course grade "
                          f"{assignment}` first")
    if students:
        missing = sorted(set(students) - set(graded))
        if missing:
            raise CourseError(f"{', '.join(missing)}: no graded submission of {assignment} (graded: "
                              f"{', '.join(graded)})")
    args = ["generate_feedback", assignment, "--force", f"--db={db_url(root, db)}"]
    for student in students or [None]:
        run_nbgrader(args + (["--student", student] if student else []), root)
    written = sorted((root / "feedback").glob(f"*/{assignment}/*.html"))
    print(f"wrote {len(written)} feedback files into {root / 'feedback'}/<student>/{assignment}/")
    return 0

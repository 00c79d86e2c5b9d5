"""Gradebooks merged: one student's autograded submission copied from a worker's (or a shard's) gradebook into the course's.

Each grading process writes its own copy of the gradebook, so no two processes write one sqlite file; the
course's gradebook is then written by one process, one student at a time. Rows are matched by name
(assignment, notebook, cell), so a shard graded on another host merges as well as a worker here.
"""
import shutil
import sqlite3
import warnings
from pathlib import Path

from sqlalchemy.exc import SAWarning

from nbgrader.api import Gradebook, MissingEntry

from .layout import CourseError, db_path

STUDENT_FIELDS = ("first_name", "last_name", "email", "lms_user_id")


def copy_gradebook(src_url, dst_url):
    """A consistent copy of a sqlite gradebook (sqlite's backup: safe while another process reads it)."""
    src, dst = db_path(src_url), db_path(dst_url)
    if not src.exists():
        raise CourseError(f"no gradebook at {src}: run `python -m course release` first")
    dst.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def submission_of(gb, assignment, student):
    """A student's submission as plain data, or None: timestamps, flags and every grade and comment by name."""
    try:
        sub = gb.find_submission(assignment, student)
    except MissingEntry:
        return None
    person = gb.find_student(student)
    data = {"student": {f: getattr(person, f) for f in STUDENT_FIELDS},
            "timestamp": sub.timestamp, "extension": sub.extension, "notebooks": {}}
    for nb in sub.notebooks:
        data["notebooks"][nb.name] = {
            "flagged": nb.flagged, "late_submission_penalty": nb.late_submission_penalty,
            "grades": {g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade) for g in nb.grades},
            "comments": {c.name: (c.auto_comment, c.manual_comment) for c in nb.comments},
        }
    return data


def put_submission(url, assignment, student, data):
    """Replaces a student's submission in the gradebook at url by data (from submission_of); None removes it."""
    with Gradebook(url) as gb:
        try:
            gb.remove_submission(assignment, student)
        except MissingEntry:
            pass
    if data is None:
        return
    with Gradebook(url) as gb, warnings.catch_warnings():
        # nbgrader's add_submission builds rows before adding them to the session: SQLAlchemy 2 warns, harmlessly
        warnings.simplefilter("ignore", SAWarning)
        _add(gb, assignment, student, data)


def _add(gb, assignment, student, data):
    gb.update_or_create_student(student, **{k: v for k, v in data["student"].items() if v is not None})
    gb.add_submission(assignment, student, timestamp=data["timestamp"], extension=data["extension"])
    for name, nb in data["notebooks"].items():
        sub_nb = gb.find_submission_notebook(name, assignment, student)
        sub_nb.flagged = nb["flagged"]
        sub_nb.late_submission_penalty = nb["late_submission_penalty"]
        for cell, (auto, manual, extra, needs) in nb["grades"].items():
            g = gb.find_grade(cell, name, assignment, student)
            g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade = auto, manual, extra, needs
        for cell, (auto, manual) in nb["comments"].items():
            c = gb.find_comment(cell, name, assignment, student)
            c.auto_comment, c.manual_comment = auto, manual
    gb.db.commit()


def merge_student(src_url, dst_url, assignment, student):
    """Copies one student's submission of an assignment from gradebook src into dst (replacing dst's)."""
    with Gradebook(src_url) as src:
        data = submission_of(src, assignment, student)
    put_submission(dst_url, assignment, student, data)
    return data is not None


def remove_student(dst_url, assignment, student):
    """Removes a student's submission of an assignment from a gradebook (an old grade must not stand for a new one)."""
    put_submission(dst_url, assignment, student, None)


def students_in(url, assignment):
    """The students with a submission of the assignment in a gradebook."""
    with Gradebook(url) as gb:
        try:
            return sorted(s.student.id for s in gb.find_assignment(assignment).submissions)
        except MissingEntry:
            return []


def merge_shard(shard_root, root, assignment, students):
    """Copies a shard's autograded notebooks of the students into the course folder (gradebook rows: merge_student)."""
    for student in students:
        src = Path(shard_root) / "autograded" / student / assignment
        dst = Path(root) / "autograded" / student / assignment
        if src.resolve() == dst.resolve() or not src.is_dir():
            continue
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)

"""The plan of a `course grade` run: the students whose inputs changed since they were last graded (ledger.py), in the
run's shard, and the gradebook their grades go to (the course's, or a shard's own)."""
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..nbgrader.seeds import ensure_secret
from . import merge
from .layout import (CourseError, course_root, db_path, db_url, notebook_names, read_notebook, require_assignment,
                     shard_dir, submitted_students)
from .ledger import Ledger, fingerprint, grading_code_digest, grading_mode


def in_shard(student, shard):
    """True when the student belongs to shard (i, N): a stable hash of the id, the same on every host."""
    return shard is None or zlib.crc32(student.encode()) % shard[1] == shard[0] - 1


@dataclass
class Plan:
    """What one `course grade` run will do."""
    root: Path
    assignment: str
    target: str                                   # the gradebook this run writes (the course's, or a shard's)
    ledger: Ledger
    todo: list = field(default_factory=list)      # students to grade
    unchanged: list = field(default_factory=list)  # graded before, inputs unchanged
    fingerprints: dict = field(default_factory=dict)
    mode: str = "gpu"                             # where the checks run kernels: "gpu" or "cpu" (ledger.grading_mode)


def unreadable(root, assignment, students):
    """{student: why} for each student with a submitted file that is not a notebook (nbgrader would fail on it)."""
    bad = {}
    for s in students:
        for p in sorted((Path(root) / "submitted" / s / assignment).glob("*.ipynb")):
            try:
                read_notebook(p)
            except CourseError as e:
                bad.setdefault(s, str(e).replace(str(Path(root)) + "/", ""))
    return bad


def make_plan(root, assignment, students=None, shard=None, force=False, db=None):
    """Which students to grade (changed since last time, or all with force) and where the grades go."""
    root = course_root(root)
    require_assignment(root, assignment)
    notebook_names(root, assignment)  # released
    found = submitted_students(root, assignment)
    if not found:
        raise CourseError(f"no submissions of {assignment} in {root / 'submitted'}: run `python -m course collect "
                          f"{assignment} ...` first")
    if students:
        unknown = sorted(set(students) - set(found))
        if unknown:
            raise CourseError(f"no submission of {assignment} from {', '.join(unknown)} in submitted/")
        found = [s for s in found if s in students]
    found = [s for s in found if in_shard(s, shard)]
    main = db_url(root, db)
    if not db_path(main).exists():
        raise CourseError(f"no gradebook at {db_path(main)}: run `python -m course release {assignment}` first")
    if shard:
        folder = shard_dir(root, assignment, shard)
        target = f"sqlite:///{folder / 'gradebook.db'}"
        if not (folder / "gradebook.db").exists():
            merge.copy_gradebook(main, target)
        ledger = Ledger(root, assignment, f"{folder.name}/ledger.jsonl")
    else:
        target, ledger = main, Ledger(root, assignment)
    secret, _ = ensure_secret(root)
    code, mode = grading_code_digest(), grading_mode()
    plan = Plan(root, assignment, target, ledger, mode=mode)
    done = ledger.entries()
    graded = set(merge.students_in(target, assignment))
    for s in found:
        fp = fingerprint(root, assignment, s, secret, code, mode)
        plan.fingerprints[s] = fp
        before = done.get(s)
        # a student whose grading failed is tried again: the cause may have been the machine, not the submission
        fresh = (before and before["fingerprint"] == fp and before["status"] == "graded" and s in graded
                 and (root / "autograded" / s / assignment).is_dir())
        (plan.unchanged if fresh and not force else plan.todo).append(s)
    return plan

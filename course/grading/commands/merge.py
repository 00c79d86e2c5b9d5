"""`course merge`: the shards of `course grade --shard i/N` joined into the course's one gradebook.

A shard writes its own gradebook and ledger under autograded/.course/<assignment>/shard-i-of-N/ and its
students' autograded notebooks where nbgrader always writes them. Merging copies each shard student's rows
into the course's gradebook (run/merge.py) and their ledger entries into the course's ledger; a shard graded
on another host is merged from that host's course folder (copied here, or reachable by path).
"""
import json

from ..cluster.shards import shard_dirs
from ..run import merge
from ..run.layout import CourseError, course_root, db_url, require_assignment
from ..run.ledger import Ledger


def _entries(path):
    latest = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            latest[e["student"]] = e
    return latest


def merge_shards(root, assignment, shard_roots=(), db=None):
    """Merges every shard found in the course folder and in shard_roots into the course's gradebook and ledger."""
    root = course_root(root)
    require_assignment(root, assignment)
    sources = [course_root(r) for r in shard_roots] or [root]
    found = [(i, n, d, src) for src in sources for i, n, d in shard_dirs(src, assignment)]
    if not found:
        raise CourseError(f"no shards of {assignment} in {', '.join(map(str, sources))}: run `python -m course grade "
                          f"{assignment} --shard i/N` there first")
    counts = {n for _, n, _, _ in found}
    if len(counts) > 1:
        raise CourseError(f"shards of different splits ({', '.join(f'of {n}' for n in sorted(counts))}) found: "
                          "merge the shards of one run; remove the others' folders under autograded/.course/")
    total = counts.pop()
    missing = sorted(set(range(1, total + 1)) - {i for i, _, _, _ in found})
    target = db_url(root, db)
    ledger = Ledger(root, assignment)
    merged = failed = 0
    for i, n, folder, src in sorted(found):
        shard_db = f"sqlite:///{folder / 'gradebook.db'}"
        entries = _entries(folder / "ledger.jsonl")
        for student, entry in sorted(entries.items()):
            if entry["status"] == "graded":
                merge.merge_shard(src, root, assignment, [student])
                merge.merge_student(shard_db, target, assignment, student)
                merged += 1
            else:
                merge.remove_student(target, assignment, student)
                failed += 1
            ledger.record({k: v for k, v in entry.items() if k != "when"} | {"shard": f"{i}/{n}"})
    print(f"merged {len(found)} of {total} shards of {assignment}: {merged} students graded, {failed} failed")
    if missing:
        print(f"shards not found (their students are not in the gradebook yet): {', '.join(f'{m}/{total}' for m in missing)}")
        return 1
    return 0

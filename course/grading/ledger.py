"""What `course grade` has done, student by student: what was graded (a fingerprint of the inputs) and how it ended.

One JSON line per finished student, appended as each finishes, so a stop halfway loses nothing and the
next run grades only students whose submission (or tests, or grading code) changed since.
"""
import hashlib
import json
import time
from pathlib import Path

from .layout import state_dir

_COURSE = Path(__file__).resolve().parent.parent


def _hash_files(h, paths, base):
    for p in sorted(paths):
        h.update(str(p.relative_to(base)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")


def grading_code_digest():
    """A hash of the code that decides verdicts (course/harness, course/topics, course/toolchain): changed code, new grades."""
    h = hashlib.sha256()
    _hash_files(h, [p for d in ("harness", "topics", "toolchain") for p in (_COURSE / d).rglob("*")
                    if p.is_file() and p.suffix in (".py", ".cpp", ".h")], _COURSE)
    return h.hexdigest()


def fingerprint(root, assignment, student, secret, code_digest):
    """What a grade depends on: the submission's files, the source notebooks, the configuration, the secret, the grading code."""
    root = Path(root)
    h = hashlib.sha256()
    sub = root / "submitted" / student / assignment
    _hash_files(h, [p for p in sub.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts], sub)
    src = root / "source" / assignment
    _hash_files(h, [p for p in src.glob("*.ipynb")], src)
    h.update((root / "nbgrader_config.py").read_bytes())
    h.update(hashlib.sha256(secret or b"").digest())
    h.update(code_digest.encode())
    return h.hexdigest()


class Ledger:
    """The JSON-lines record of one assignment's grading (one per shard)."""

    def __init__(self, root, assignment, name="ledger.jsonl"):
        self.path = state_dir(root, assignment) / name

    def entries(self):
        """{student: their latest entry}."""
        latest = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    e = json.loads(line)
                except ValueError:  # a line cut short by a stop: that student is graded again
                    continue
                latest[e["student"]] = e
        return latest

    def record(self, entry):
        """Appends one student's outcome."""
        entry = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), **entry}
        with open(self.path, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()

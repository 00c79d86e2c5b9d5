"""What `course grade` has done, student by student: what was graded (a fingerprint of the inputs) and how it ended.

One JSON line per finished student, appended as each finishes, so a stop halfway loses nothing and the
next run grades only students whose submission (or tests, or grading code) changed since.
"""
import hashlib
import json
import time
from pathlib import Path

from .layout import state_dir

_COURSE = Path(__file__).resolve().parents[2]  # the course package


def _hash_files(h, paths, base):
    for p in sorted(paths):
        h.update(str(p.relative_to(base)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")


GRADING_FILES = (".py", ".cpp", ".h", ".png", ".txt")  # the course package's code and the data its checks read


def grading_code_digest():
    """A hash of the whole course package (every module, C++ source and data file): any change to what grading runs,
    new grades."""
    h = hashlib.sha256()
    _hash_files(h, [p for p in _COURSE.rglob("*") if p.is_file() and p.suffix in GRADING_FILES
                    and "__pycache__" not in p.parts], _COURSE)
    return h.hexdigest()


def grading_mode():
    """"gpu" or "cpu": where this process's checks run kernels (a class graded in CPU mode is graded again on a GPU)."""
    from ...device import cpu_mode
    return "cpu" if cpu_mode() else "gpu"


def fingerprint(root, assignment, student, secret, code_digest, mode="gpu"):
    """What a grade depends on: the submission's files, the source notebooks, the configuration, the secret, the
    grading code, and the mode (GPU or CPU) it is graded in."""
    root = Path(root)
    h = hashlib.sha256()
    sub = root / "submitted" / student / assignment
    _hash_files(h, [p for p in sub.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts], sub)
    src = root / "source" / assignment
    _hash_files(h, [p for p in src.glob("*.ipynb")], src)
    h.update((root / "nbgrader_config.py").read_bytes())
    h.update(hashlib.sha256(secret or b"").digest())
    h.update(code_digest.encode())
    h.update(mode.encode())
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

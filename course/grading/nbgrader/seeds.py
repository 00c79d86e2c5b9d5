"""Hidden random cases per student: each seed a test cell names becomes one derived from the instructor's secret and the student's id.

A hidden test cell holds a literal seed (`check_rgb2grey(rgb2grey_py, "random", seed=4021)`). At grading
time the seed in the cell becomes HMAC(secret, student, seed): every student gets other random sizes, so
one student's feedback tells another nothing, and grading the same submission again (or re-verifying
it) gives the same cases. Without a secret the seeds stay as written.
"""
import ast
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from ..cell_roles import is_test_cell

SECRET_FILE = ".grading_secret"  # in the course folder, next to nbgrader_config.py: never in release/
SECRET_ENV = "COURSE_GRADING_SECRET"


def secret_path(root="."):
    """Where the course's grading secret is kept."""
    return Path(root) / SECRET_FILE


def load_secret(root="."):
    """The instructor's secret as bytes: $COURSE_GRADING_SECRET, else the course folder's .grading_secret, else None."""
    if os.environ.get(SECRET_ENV):
        return os.environ[SECRET_ENV].encode()
    path = secret_path(root)
    if path.is_file():
        text = path.read_text().strip()
        return text.encode() if text else None
    return None


def ensure_secret(root="."):
    """The course's secret, created (readable by its owner only) when there is none; returns (secret, created)."""
    found = load_secret(root)
    if found is not None:
        return found, False
    path = secret_path(root)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return load_secret(root), True


def personal_seed(seed, student, secret):
    """The seed a student's hidden cases use in place of the cell's seed (the same for the same three inputs)."""
    if secret is None:
        return seed
    digest = hmac.new(secret, f"{student}\0{seed}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % 1_000_000_007


def _seed_literals(source):
    """(line, start column, end column, value) of every `seed=<int>` keyword argument in source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                v = kw.value
                if kw.arg == "seed" and isinstance(v, ast.Constant) and type(v.value) is int \
                        and v.lineno == v.end_lineno:
                    found.append((v.lineno, v.col_offset, v.end_col_offset, v.value))
    return found


def has_seed(source):
    """Whether a cell's source holds a literal seed that grading makes a student's own (so it must stay with the judge)."""
    return bool(_seed_literals(source))


def personal_source(source, student, secret):
    """A test cell's source with each literal seed replaced by the student's own."""
    if secret is None:
        return source
    lines = source.split("\n")
    for lineno, start, end, value in sorted(_seed_literals(source), reverse=True):
        # ast's columns count UTF-8 bytes
        raw = lines[lineno - 1].encode()
        lines[lineno - 1] = (raw[:start] + str(personal_seed(value, student, secret)).encode() + raw[end:]).decode()
    return "\n".join(lines)


def personal_notebook(nb, student, secret):
    """A copy of notebook nb whose test cells use the student's seeds."""
    import nbformat
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if is_test_cell(cell):
            cell.source = personal_source(cell.source, student, secret)
    return nb

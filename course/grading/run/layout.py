"""Where things live in a course folder (nbgrader's layout), and the errors the instructor's commands give for bad input."""
import os
import subprocess
import sys
from pathlib import Path

import nbformat


class CourseError(Exception):
    """Bad input, said plainly; the command that raises it has changed nothing."""


def course_root(root="."):
    """The course folder: it holds nbgrader_config.py and source/."""
    root = Path(root).resolve()
    if not (root / "nbgrader_config.py").is_file():
        raise CourseError(f"{root} is not a course folder: it has no nbgrader_config.py "
                          "(run the command in the folder that holds source/ and nbgrader_config.py, or pass --root)")
    return root


def assignments(root, where="source"):
    """The assignments in source/ (or release/, submitted/...), sorted."""
    folder = Path(root) / where
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) if folder.is_dir() else []


def require_assignment(root, assignment, where="source"):
    """Raises CourseError unless the assignment has a folder in source/ (or where)."""
    known = assignments(root, where)
    if assignment not in known:
        raise CourseError(f"no assignment {assignment!r} in {where}/: the assignments are "
                          f"{', '.join(known) if known else '(none)'}")


def notebook_names(root, assignment, where="release"):
    """The names (without .ipynb) of an assignment's notebooks in release/ (or where)."""
    folder = Path(root) / where / assignment
    names = sorted(p.stem for p in folder.glob("*.ipynb"))
    if not names:
        hint = "run `python -m course release " + assignment + "` first" if where == "release" else "nothing there"
        raise CourseError(f"{folder} holds no notebooks: {hint}")
    return names


def db_url(root, db=None):
    """The gradebook's URL: db if given (a path or a URL), else nbgrader's default, gradebook.db in the course folder."""
    if db is None:
        return f"sqlite:///{Path(root).resolve() / 'gradebook.db'}"
    return db if "://" in db else f"sqlite:///{Path(db).resolve()}"


def db_path(url):
    """The file of a sqlite gradebook URL."""
    if not url.startswith("sqlite:///"):
        raise CourseError(f"only sqlite gradebooks are supported here, not {url}")
    return Path(url[len("sqlite:///"):])


def submitted_students(root, assignment):
    """The students with a submission of the assignment in submitted/, sorted."""
    folder = Path(root) / "submitted"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / assignment).is_dir() and not p.name.startswith("."))


def state_dir(root, assignment, make=True):
    """Where the course's own grading records for an assignment live: autograded/.course/<assignment>/ (nbgrader ignores
    it), made unless make is False."""
    path = Path(root) / "autograded" / ".course" / assignment
    if make:
        path.mkdir(parents=True, exist_ok=True)
    return path


def shard_name(i, n):
    """shard-i-of-N: the folder of shard i of N's gradebook and ledger in the state_dir, its Slurm task's status file."""
    return f"shard-{i}-of-{n}"


def shard_dir(root, assignment, shard):
    """Where shard (i, N) keeps its own gradebook and ledger (course merge collects them), made if missing."""
    path = state_dir(root, assignment) / shard_name(*shard)
    path.mkdir(exist_ok=True)
    return path


def nbgrader_env():
    """The environment for nbgrader: this Python's folder first on PATH (nbgrader calls `alembic` by name)."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_nbgrader(args, root, timeout=None, check=True):
    """Runs `nbgrader ARGS` in the course folder; raises CourseError with nbgrader's last words when it fails."""
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=nbgrader_env(),
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        errors = [line for line in proc.stderr.splitlines() if "ERROR" in line or "Error" in line]
        raise CourseError(f"nbgrader {' '.join(args)} failed:\n" + "\n".join((errors or proc.stderr.splitlines())[-15:]))
    return proc


def read_notebook(path):
    """A notebook read and validated; CourseError naming the file when it is not one."""
    try:
        nb = nbformat.read(str(path), as_version=4)
        nbformat.validate(nb)
    except Exception as e:  # JSON errors, schema errors, binary files
        raise CourseError(f"{path} is not a Jupyter notebook ({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
    return nb

"""What the tests share: the repository's root, and the commands they run in a course folder (nbgrader's, the course's).

A plain module, not a conftest: `python -m tests.test_corpus` and the tests import it by name. Shared fixtures would
go in tests/conftest.py.
"""
import shutil
import subprocess
import sys
from pathlib import Path

from course.grading.run.layout import nbgrader_env

ROOT = Path(__file__).resolve().parent.parent
SECRET = "the instructor's secret for these tests"


def command_env(extra=None):
    """This process's environment with extra, and this Python's folder first on PATH (nbgrader calls `alembic` by name)."""
    return {**nbgrader_env(), **(extra or {})}


def nbgrader(*args, cwd, timeout=1800, env=None):
    """Runs an nbgrader command in a course folder, with this Python."""
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=command_env(env),
                          capture_output=True, text=True, timeout=timeout)


def course(*args, cwd, check=True, timeout=3600):
    """Runs `python -m course ARGS` in a course folder with the tests' grading secret."""
    from course.grading.nbgrader import seeds
    proc = subprocess.run([sys.executable, "-m", "course", *args], cwd=cwd, env=command_env({seeds.SECRET_ENV: SECRET}),
                          capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def course_folder(tmp_path, released=True):
    """A course folder with source/ and the configuration (and the committed release, without nbgrader's gradebook)."""
    shutil.copytree(ROOT / "source", tmp_path / "source")
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    if released:
        shutil.copytree(ROOT / "release", tmp_path / "release")
    return tmp_path

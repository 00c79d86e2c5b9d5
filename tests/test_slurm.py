"""`course slurm grade` against a real Slurm: Debian's slurm-wlm started here as a one-node cluster by the test.

The fast tests read the batch scripts a dry run writes and the bad inputs. The slow one starts munged, slurmctld
and slurmd (their files in a temporary folder, nothing of the machine's configuration used), grades the example
class (alice, bob, carol) in 2 shards through Slurm with one shard cancelled while it grades, reads the merge
job's report, submits again (only that shard's students are graded) and compares the gradebook with the marks
one host's `course grade` gives (tests/test_cli.py). Without the Debian packages (or root, which slurmd needs) the
slow test is skipped, unless COURSE_SLURM_TEST=required (as .ci/run sets it), which makes that a failure.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course.grading.nbgrader import seeds
from course.grading.run.plan import in_shard
from course.grading.cluster.localslurm import LocalCluster, missing_prerequisite
from course.grading.run.gradebook import grades
from course.grading.cluster.slurm import array_spec
from course.grading.commands.examples import write_submissions
from tests.support import ROOT, SECRET, course, course_folder
from tests.test_pipeline import EXPECTED_PASSES

EXAMPLES = ("alice", "bob", "carol")
SCORES = {"alice": 33, "bob": 16, "carol": 0}  # README: the example students' grayscale totals, graded on one host


def required():
    """True where CI requires the slurm test to run (COURSE_SLURM_TEST=required)."""
    return os.environ.get("COURSE_SLURM_TEST") == "required"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running one-node cluster, stopped (and checked stopped) after the module's tests."""
    reason = missing_prerequisite()
    if reason and required():
        pytest.fail(f"{reason} (COURSE_SLURM_TEST=required makes this a failure)", pytrace=False)
    if reason:
        pytest.skip(f"{reason}; COURSE_SLURM_TEST=required makes this a failure")
    c = LocalCluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield c.start()
    finally:
        c.stop()
        assert c.leftovers() == [], "Slurm processes left running"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A course folder with grayscale released (stubs not compiled): nbgrader's gradebook made once for the module."""
    root = course_folder(tmp_path_factory.mktemp("released") / "course", released=False)
    course("release", "grayscale", "--no-compile", cwd=root)
    return root


@pytest.fixture
def class_folder(released, tmp_path):
    """A copy of the released course folder with the example students' submissions."""
    root = shutil.copytree(released, tmp_path / "course")
    write_submissions(ROOT / "examples", root / "release", root / "submitted", "grayscale")
    return root


# ---- fast: the scripts, and bad input (no Slurm needed)


def test_a_dry_run_writes_readable_scripts_and_submits_nothing(class_folder):
    root = class_folder
    proc = course("slurm", "grade", "grayscale", "--tasks", "2", "--cpu", "--dry-run", "--time=1:00:00",
                  "--partition", "short", cwd=root)
    here = root / "slurm" / "grayscale"
    grade, merge = (here / "grade.sh").read_text(), (here / "merge.sh").read_text()
    assert '-m course grade grayscale --shard "$shard/2"' in grade and "shard=$SLURM_ARRAY_TASK_ID" in grade
    assert "#SBATCH --array=1-2" in grade and "#SBATCH --time=1:00:00" in grade
    assert "#SBATCH --partition short" in grade and "--gres" not in grade and "COURSE_CPU_MODE=1" in grade
    assert "-m course merge grayscale" in merge and "course slurm report grayscale --tasks 2" in merge
    assert "#SBATCH --partition short" in merge and "--time" not in merge.split("#SBATCH --job-name")[1]
    for script in (here / "grade.sh", here / "merge.sh"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "shard 1/2: 1 to grade (bob)" in proc.stdout and "shard 2/2: 2 to grade (alice, carol)" in proc.stdout
    assert not (here / "submitted.json").exists()
    assert not list((root / "autograded" / ".course" / "grayscale").glob("shard-*"))  # a dry run leaves no shards
    gpu = course("slurm", "grade", "grayscale", "--tasks", "3", "--dry-run", cwd=root)
    assert "#SBATCH --gres=gpu:1" in (here / "grade.sh").read_text() and "COURSE_CPU_MODE" not in \
        (here / "grade.sh").read_text()
    assert "shard 3/3: 3 to grade" in gpu.stdout  # crc32 puts all three example students in shard 3 of 3


def test_the_array_numbers_shards_as_course_grade_does():
    assert array_spec([1, 2, 3, 5, 7, 8]) == "1-3,5,7-8" and array_spec([2]) == "2"
    # task ids 1..N are `--shard i/N`: every student in exactly one of them
    students = [f"s{i:02d}" for i in range(40)]
    assert sorted(s for i in (1, 2, 3) for s in students if in_shard(s, (i, 3))) == students


def test_bad_input_is_refused_and_changes_nothing(class_folder):
    root = class_folder
    env_path = os.environ.get("PATH", "")
    no_slurm = os.pathsep.join(p for p in env_path.split(os.pathsep) if not (Path(p) / "sbatch").exists())
    cases = [(("slurm", "grade", "nope", "--tasks", "2", "--dry-run"), "no assignment 'nope'", None),
             (("slurm", "grade", "grayscale", "--tasks", "0", "--dry-run"), "--tasks 0", None),
             (("slurm", "grade", "grayscale", "--tasks", "2", "oops", "--dry-run"), "not an sbatch option", None),
             (("slurm", "grade", "grayscale", "--tasks", "2"), "sbatch is not on PATH", no_slurm),
             (("grade", "grayscale", "--partition=gpu"), "unrecognized arguments", None),
             (("slurm", "report", "grayscale", "--tasks", "2", "--partition=gpu"), "takes no sbatch options", None)]
    for args, words, path in cases:
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{path}"} if path else None
        proc = subprocess.run([sys.executable, "-m", "course", *args], cwd=root, capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 2 and words in proc.stderr, (args, proc.stderr)
        assert not (root / "slurm").exists() and not list((root / "autograded").rglob("shard-*"))


# ---- slow: the example class graded through a real Slurm, a shard cancelled, submitted again


def gradebook(root):
    """{student: {(notebook, test) passed}}, and {student: total}, from the course's gradebook."""
    table = grades(f"sqlite:///{root / 'gradebook.db'}", "grayscale", root / "release")
    passed = {s: {k for k, row in table.items() if s in row and row[s][0] == row[s][1]} for s in EXAMPLES}
    totals = {s: sum(row[s][0] for row in table.values() if s in row) for s in EXAMPLES
              if any(s in row for row in table.values())}
    return passed, totals


def submit(cluster, root):
    """`course slurm grade grayscale --tasks 2 --cpu` on the cluster: (its output, the job ids it wrote)."""
    env = {**cluster.env, seeds.SECRET_ENV: SECRET,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "course", "slurm", "grade", "grayscale", "--tasks", "2", "--cpu"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = root / "slurm" / "grayscale" / "submitted.json"
    return proc.stdout, json.loads(path.read_text()) if path.exists() else None


def shard_ledger(root, i):
    path = root / "autograded" / ".course" / "grayscale" / f"shard-{i}-of-2" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.xdist_group("slurm")
@pytest.mark.timeout(1200)
def test_a_class_graded_through_slurm_survives_a_cancelled_shard(cluster, class_folder):
    root = class_folder
    assert [s for s in EXAMPLES if in_shard(s, (1, 2))] == ["bob"]  # shard 1 holds bob, shard 2 alice and carol
    out, jobs = submit(cluster, root)
    assert jobs["shards"] == [1, 2] and "shard 1/2: 1 to grade (bob)" in out
    log = root / "slurm" / "grayscale" / "logs" / f"grade-{jobs['grade_job']}_1.out"
    deadline = time.monotonic() + 300
    while not (log.exists() and "to grade" in log.read_text()):  # shard 1 has started grading bob
        assert time.monotonic() < deadline, cluster.run("squeue").stdout
        time.sleep(1)
    cluster.run("scancel", f"{jobs['grade_job']}_1", check=True)
    cluster.wait_jobs([jobs["grade_job"], jobs["merge_job"]], timeout=900)

    # the merge ran after the array however it ended: shard 2 merged, shard 1 reported with its student
    report = (root / "slurm" / "grayscale" / "report.txt").read_text()
    assert "shard 1/2: did not finish: CANCELLED" in report and "not graded: bob" in report, report
    assert "shard 2/2: all 2 students graded" in report and "alice" not in report and "carol" not in report, report
    passed, totals = gradebook(root)
    assert totals == {"alice": SCORES["alice"], "carol": SCORES["carol"]}, totals
    assert passed["alice"] == EXPECTED_PASSES["alice"]
    assert shard_ledger(root, 1) == []  # bob was stopped mid-grading: no grade recorded for him

    # submitted again: only shard 1 is submitted, and only bob graded
    out, again = submit(cluster, root)
    assert again["shards"] == [1] and again["grade_job"] != jobs["grade_job"], out
    assert "shard 2/2: 0 to grade, 2 graded before" in out
    cluster.wait_jobs([again["grade_job"], again["merge_job"]], timeout=900)
    report = (root / "slurm" / "grayscale" / "report.txt").read_text()
    assert "every student is graded" in report and "not graded" not in report, report
    assert [e["student"] for e in shard_ledger(root, 1)] == ["bob"]
    assert sorted(e["student"] for e in shard_ledger(root, 2)) == ["alice", "carol"]  # graded once, not again
    passed, totals = gradebook(root)
    assert totals == SCORES and passed == {s: EXPECTED_PASSES[s] for s in EXAMPLES}, (totals, passed)

    # once more: nothing to grade, nothing submitted
    out, last = submit(cluster, root)
    assert "nothing to grade" in out and last == again

"""A class graded on a Slurm cluster, as a job array of `course grade --shard i/N` and a merge: the batch scripts, and what
sbatch and scontrol are asked (the command, `course slurm grade` and `course slurm report`: commands/slurm.py).

The course folder lies on the cluster's shared file system. `slurm grade` writes two batch scripts into
slurm/<assignment>/, where an instructor can read, edit and submit them again: grade.sh, whose array task i runs
`course grade ASSIGNMENT --shard i/N` (one GPU each, or CPU mode with --cpu), and merge.sh, which runs once the
array has ended however it ended (afterany): `course merge`, then `course slurm report`, which names every shard
that did not finish (killed, timed out, failed) with the students it held. Each shard keeps its own ledger, so
submitting again submits only the shards with students not graded yet (or changed since), and grades only them.
"""
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..run.layout import CourseError, shard_name, state_dir

# sbatch options that also hold for the merge job (where it may run and who pays); the rest are the shards' own
SHARED_OPTIONS = ("--partition", "-p", "--account", "-A", "--qos", "-q", "--reservation", "--clusters", "-M")


def folder(root, assignment):
    """slurm/<assignment>/ in the course folder: the batch scripts, their logs, each shard's exit status, the report."""
    path = Path(root) / "slurm" / assignment
    for sub in ("logs", "status"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


def option_lines(options):
    """sbatch options as #SBATCH lines, an option and its value on one line (`--time 2:00:00`)."""
    lines, options = [], list(options)
    while options:
        opt = options.pop(0)
        if not opt.startswith("-"):
            raise CourseError(f"{opt!r} is not an sbatch option (sbatch options start with -, e.g. --time=2:00:00)")
        if "=" not in opt and options and not options[0].startswith("-"):
            opt += " " + shlex.quote(options.pop(0))
        lines.append(f"#SBATCH {opt}")
    return lines


def _name(line):
    return re.split(r"[ =]", line[len("#SBATCH "):], maxsplit=1)[0]


def _written_by(assignment, tasks, cpu, options):
    return " ".join(["python -m course slurm grade", assignment, "--tasks", str(tasks)] + (["--cpu"] if cpu else [])
                    + [shlex.quote(o) for o in options])


def grade_script(root, assignment, tasks, cpu=False, options=(), python=sys.executable, pythonpath=None):
    """The job array's batch script: task i grades shard i/N of the class in the course folder."""
    root, here = Path(root), folder(root, assignment)
    extra = option_lines(options)
    if not cpu and not any(_name(line) == "--gres" for line in extra):
        extra.append("#SBATCH --gres=gpu:1")
    env = ["export COURSE_CPU_MODE=1  # --cpu: no GPU; the CUDA rungs build with g++ and run on the CPU"] if cpu else []
    if pythonpath:
        env.append(f"export PYTHONPATH={shlex.quote(pythonpath)}")
    return "\n".join([
        "#!/bin/bash",
        f"# Array task i grades shard i/{tasks} of {assignment}: `course grade {assignment} --shard i/{tasks}`, the",
        "# students whose id hashes to i. Each shard keeps its own ledger, so a task run again grades only what is",
        "# not graded yet. Written by",
        f"#   {_written_by(assignment, tasks, cpu, options)}",
        "# Edit it and submit it again (only some shards: --array=2,3), then merge.sh after it:",
        f"#   sbatch --array=1-{tasks} {here / 'grade.sh'}",
        f"#SBATCH --job-name=grade-{assignment}",
        f"#SBATCH --array=1-{tasks}",
        f"#SBATCH --chdir={root}",
        f"#SBATCH --output={here / 'logs' / 'grade-%A_%a.out'}",
        *extra,
        "",
        *env,
        "shard=$SLURM_ARRAY_TASK_ID",
        f"status={here / 'status' / shard_name('$shard', tasks)}",
        'rm -f "$status"',
        f"{shlex.quote(python)} -m course grade {assignment} --shard \"$shard/{tasks}\" "
        "--workers \"${SLURM_CPUS_PER_TASK:-1}\"",
        "code=$?",
        'echo "$code" > "$status"  # no status at all: the task was killed or timed out (the merge job reports it)',
        'exit "$code"',
        ""])


def merge_script(root, assignment, tasks, options=(), python=sys.executable, pythonpath=None):
    """The merge job's batch script: the shards into gradebook.db, then the report of the shards that did not finish."""
    root, here = Path(root), folder(root, assignment)
    shared = [line for line in option_lines(options) if _name(line) in SHARED_OPTIONS]
    py = shlex.quote(python)
    return "\n".join([
        "#!/bin/bash",
        f"# Joins the {tasks} shards of {assignment} into the course's gradebook once the grading array has ended,",
        f"# however it ended, and writes {here / 'report.txt'}: each shard that did not finish, with its students.",
        "# Submit it again after an array with",
        f"#   sbatch --dependency=afterany:JOBID --export=ALL,COURSE_GRADE_JOB=JOBID {here / 'merge.sh'}",
        f"#SBATCH --job-name=merge-{assignment}",
        f"#SBATCH --chdir={root}",
        f"#SBATCH --output={here / 'logs' / 'merge-%j.out'}",
        *shared,
        "",
        *([f"export PYTHONPATH={shlex.quote(pythonpath)}"] if pythonpath else []),
        f"{py} -m course merge {assignment}",
        f"{py} -m course slurm report {assignment} --tasks {tasks} --job \"${{COURSE_GRADE_JOB:-}}\"",
        ""])


def check_split(root, assignment, tasks):
    """CourseError when the shards graded here before were of another split (the ledgers are per split)."""
    from .shards import shard_dirs
    if tasks < 1:
        raise CourseError(f"--tasks {tasks}: a class is split into at least 1 shard")
    other = sorted({n for _, n, _ in shard_dirs(root, assignment) if n != tasks})
    if other:
        raise CourseError(f"{assignment} was graded here in {' and '.join(map(str, other))} shards: submit with "
                          f"--tasks {other[0]} (the shards' ledgers know what is graded), or remove "
                          f"{state_dir(root, assignment, make=False) / shard_name('*', other[0])} to split the class anew")


def shard_plans(root, assignment, tasks):
    """{i: the plan of shard i/N} (students graded and still to grade, from its ledger by the same in_shard rule)."""
    from ..run.plan import make_plan
    return {i: make_plan(root, assignment, shard=(i, tasks)) for i in range(1, tasks + 1)}


def array_spec(shards):
    """[1, 2, 3, 5] -> '1-3,5' (sbatch --array)."""
    runs = []
    for i in sorted(shards):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def sbatch_path():
    """sbatch's path; CourseError where there is none (not a Slurm cluster's login node)."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise CourseError("sbatch is not on PATH: run `course slurm grade` on a Slurm cluster's login node "
                          "(--dry-run writes the batch scripts without submitting them)")
    return sbatch


def submit_job(args, what):
    """Submits a batch job (sbatch ARGS), the job's id; CourseError with sbatch's reason where it refuses the job."""
    proc = subprocess.run([sbatch_path(), "--parsable", *args], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        hint = " (a partition without GPUs: submit with --cpu)" if "gres" in proc.stderr.lower() else ""
        raise CourseError(f"sbatch refused the {what}{hint}: {proc.stderr.strip()}")
    return proc.stdout.strip().split(";")[0]


def task_states(job):
    """{array task: Slurm's state (COMPLETED, CANCELLED, TIMEOUT, FAILED...)} of a job array, {} when unknown."""
    scontrol = shutil.which("scontrol")
    if not job or scontrol is None:
        return {}
    out = ""
    for _ in range(3):  # a busy controller may time out; the report is still written without the states
        try:
            proc = subprocess.run([scontrol, "-o", "show", "job", str(job)], capture_output=True, text=True,
                                  timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0:
            out = proc.stdout
            break
        time.sleep(5)
    states = {}
    for line in out.splitlines():
        task, state = re.search(r"ArrayTaskId=(\S+)", line), re.search(r"JobState=(\S+)", line)
        if task and state and task.group(1).isdigit():
            states[int(task.group(1))] = state.group(1)
    return states

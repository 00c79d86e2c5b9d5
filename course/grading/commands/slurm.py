"""`course slurm grade` and `course slurm report`: a class graded on a Slurm cluster, as a job array of `course grade
--shard i/N` and a merge (the batch scripts and what sbatch and scontrol are asked: cluster/slurm.py).

`slurm grade` writes the two batch scripts into slurm/<assignment>/ and submits the shards with students to grade,
then the merge after them; `slurm report` is what the merge job runs after `course merge`: each shard's outcome,
and the students of every shard that did not finish.
"""
import json
import shutil
import time

from ..cluster.slurm import (array_spec, check_split, folder, grade_script, merge_script, option_lines, sbatch_path,
                             shard_plans, submit_job, task_states)
from ..run.layout import course_root, require_assignment, shard_name


def submit(root, assignment, tasks, options=(), cpu=False, dry_run=False, pythonpath=None):
    """Writes the batch scripts and submits the shards with students to grade, then the merge after them."""
    root = course_root(root)
    require_assignment(root, assignment)
    check_split(root, assignment, tasks)
    option_lines(options)  # bad options refused before anything is written
    if not dry_run:
        sbatch_path()
    from ..cluster.shards import shard_dirs
    before = {d for _, _, d in shard_dirs(root, assignment)}
    kept = []  # becomes [True] once the shards' folders are in use (the array submitted, or graded before)
    try:
        _submit(root, assignment, tasks, options, cpu, dry_run, pythonpath, kept)
    finally:
        if not kept:  # planning made the shards' folders: a dry run or a refused submission leaves none behind
            for _, _, d in shard_dirs(root, assignment):
                if d not in before:
                    shutil.rmtree(d)
    return 0


def _submit(root, assignment, tasks, options, cpu, dry_run, pythonpath, kept):
    """submit()'s work; appends to kept once the shards' folders are in use."""
    plans = shard_plans(root, assignment, tasks)
    here = folder(root, assignment)
    (here / "grade.sh").write_text(grade_script(root, assignment, tasks, cpu, options, pythonpath=pythonpath))
    (here / "merge.sh").write_text(merge_script(root, assignment, tasks, options, pythonpath=pythonpath))
    todo = [i for i, plan in plans.items() if plan.todo]
    for i, plan in plans.items():
        print(f"shard {i}/{tasks}: {len(plan.todo)} to grade"
              + (f" ({', '.join(plan.todo[:8])}{', ...' if len(plan.todo) > 8 else ''})" if plan.todo else "")
              + f", {len(plan.unchanged)} graded before")
    print(f"batch scripts: {here / 'grade.sh'}, {here / 'merge.sh'}")
    if not todo:
        print(f"nothing to grade: every student of every shard is graded; `python -m course merge {assignment}` "
              "joins the shards")
        kept.append(True)
        return
    spec = array_spec(todo)
    if dry_run:
        print(f"--dry-run: nothing submitted; to submit: sbatch --array={spec} {here / 'grade.sh'}, then "
              f"sbatch --dependency=afterany:JOBID --export=ALL,COURSE_GRADE_JOB=JOBID {here / 'merge.sh'}")
        return
    for i in todo:
        (here / "status" / shard_name(i, tasks)).unlink(missing_ok=True)
    (here / "report.txt").unlink(missing_ok=True)
    job = submit_job([f"--array={spec}", str(here / "grade.sh")], "grading array")
    kept.append(True)
    merge_job = submit_job([f"--dependency=afterany:{job}", f"--export=ALL,COURSE_GRADE_JOB={job}",
                         str(here / "merge.sh")], f"merge job (the grading array {job} is submitted: submit merge.sh "
                        f"after it by hand, as its first lines say)")
    (here / "submitted.json").write_text(json.dumps({"grade_job": job, "merge_job": merge_job, "tasks": tasks,
                                                     "shards": todo, "when": time.strftime("%Y-%m-%d %H:%M:%S")}))
    print(f"submitted: job array {job} (shards {spec} of {tasks}) and merge job {merge_job} (after the array, "
          "however it ends)")
    print(f"follow them: squeue -j {job},{merge_job}; logs in {here / 'logs'}; the merge writes "
          f"{here / 'report.txt'}")


def shard_report(root, assignment, tasks, job=None):
    """(lines, students not graded): each shard's outcome, and the students of every shard that did not finish."""
    root = course_root(root)
    here = folder(root, assignment)
    plans, states = shard_plans(root, assignment, tasks), task_states(job)
    lines, missing = [], {}
    for i, plan in plans.items():
        status = here / "status" / shard_name(i, tasks)
        code = status.read_text().strip() if status.exists() else None
        state = states.get(i)
        held = sorted(plan.todo + plan.unchanged)
        if not plan.todo:
            lines.append(f"shard {i}/{tasks}: all {len(held)} students graded"
                         + (f" ({state})" if state else " (before this array)" if states else ""))
            continue
        failed = {s: e.get("reason", "?") for s, e in plan.ledger.entries().items()
                  if s in plan.todo and e["status"] == "failed"}
        how = ("did not finish: " + (state or "killed, timed out or never run") if code is None
               else f"ended with exit status {code}" + (f" ({state})" if state else ""))
        lines.append(f"shard {i}/{tasks}: {how}; {len(plan.todo)} of its {len(held)} students not graded: "
                     + ", ".join(s + (f" (failed: {failed[s]})" if s in failed else "") for s in plan.todo))
        missing.update({s: i for s in plan.todo})
    return lines, missing


def report(root, assignment, tasks, job=None):
    """Writes slurm/<assignment>/report.txt (the merge job runs it): exit status 1 when students are not graded."""
    lines, missing = shard_report(root, assignment, tasks, job)
    head = (f"{assignment}: {tasks} shards" + (f", job array {job}" if job else "")
            + f" ({time.strftime('%Y-%m-%d %H:%M:%S')})")
    if missing:
        shards = sorted(set(missing.values()))
        again = (f"{len(missing)} students of shard{'s' if len(shards) > 1 else ''} "
                 f"{', '.join(f'{i}/{tasks}' for i in shards)} are not graded. Submit again to grade only them "
                 f"(with the options you gave): python -m course slurm grade {assignment} --tasks {tasks} ...")
    else:
        again = "every student is graded and merged into the gradebook"
    text = "\n".join([head, *lines, again]) + "\n"
    (folder(course_root(root), assignment) / "report.txt").write_text(text)
    print(text, end="")
    return 1 if missing else 0

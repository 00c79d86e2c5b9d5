"""Grading time: today's `nbgrader autograde` against `python -m course grade`, in one run, seconds per student.

One command prints everything and writes it as JSON (on the GPU host, in at most --budget seconds):

    python benchmarks/grading.py [--json FILE]                       # grayscale: 30 students, the defaults
    python benchmarks/grading.py --class 0 --tamper --budget 99999   # just the example (and tamper) students
    python benchmarks/grading.py --slurm 3 [--json FILE]             # one course grade, then a local Slurm in 3 shards

A synthetic class is the example students of the assignment (right, typical mistakes, nothing) replicated
with variations: each copy's answers carry a comment naming the student, so each CUDA source is new to the
compiler, as a real class's would be. Today's path is `nbgrader autograde` of the example students, one after
another (the measurement in issue 11: 228 s for three); the new one is `python -m course grade` of the whole
class, its one trusted pass (every test cell judged outside the kernel; the audit's clean re-run, course verify,
can be timed apart on a sample with --verify-sample). --repeat N grades the class N times, each in fresh course
and build folders (a stress run), and every student a run failed is printed with the reason. Each
path starts with its own build folder, warmed with the released stub (so the precompiled headers and the
runtime are built, as on any host that graded before) and cold for every student's source. A path that would
run past the budget is stopped and its figure taken from the students it finished.
"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from course.device import nvidia_smi  # noqa: E402 (the course from this folder)

SECRET = "benchmark secret"


def log(*a):
    """Prints at once."""
    print(*a, flush=True)


def env_for(build_dir, extra=None):
    """The environment of a path: its own build folder, this Python first on PATH, the benchmark's secret."""
    return {**os.environ, "COURSE_BUILD_DIR": str(build_dir), "COURSE_GRADING_SECRET": SECRET, "PYTHONWARNINGS": "ignore",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **(extra or {})}


def host():
    """What the figures were measured on."""
    info = {"host": platform.node(), "cores": os.cpu_count(), "python": platform.python_version(),
            "when": datetime.now().isoformat(timespec="seconds")}
    try:
        import torch
        info["torch"] = torch.__version__
        info["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        info["gpus"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as e:  # noqa: B902
        info["torch"] = f"unavailable: {e}"
    info["cpu_mode"] = os.environ.get("COURSE_CPU_MODE") == "1" or not info.get("gpu")
    return info


def vary(answers, student):
    """A student's copy of example answers: the same code with a comment naming the student (a new source to compile)."""
    out = {}
    for gid, text in answers.items():
        if 'r"""' in text:  # CUDA source: the comment goes into the compiled text
            out[gid] = text.replace('r"""', f'r"""\n// {student}\n', 1)
        else:
            out[gid] = text.rstrip("\n") + f"\n# {student}\n"
    return out


def bases(assignment, tamper):
    """{base student: answers} from examples/ (and tests/tamper/)."""
    from course.grading.commands.examples import answers_in
    folders = [ROOT / "examples" / assignment] + ([ROOT / "tests" / "tamper" / assignment] if tamper else [])
    return {p.name: answers_in(p) for f in folders if f.is_dir() for p in sorted(f.iterdir()) if p.is_dir()}


def by_example(scores):
    """{example student: the sorted distinct scores of its copies} from {s07-bob: score}: one score each when grading is right."""
    out = {}
    for student, score in scores.items():
        out.setdefault(student.split("-", 1)[-1], set()).add(score)
    return {k: sorted(v) for k, v in sorted(out.items())}


def write_class(course, assignment, students):
    """Writes submitted/<student>/<assignment>/ for {student: answers}."""
    import nbformat
    from course.grading.commands.examples import fill
    released = {p.name: nbformat.read(p, as_version=4) for p in sorted((course / "release" / assignment).glob("*.ipynb"))}
    for student, answers in students.items():
        out = course / "submitted" / student / assignment
        out.mkdir(parents=True, exist_ok=True)
        for name, nb in released.items():
            nbformat.write(fill(nb, answers), out / name)


def warm_up(course, assignment, build_dir):
    """Builds the released CUDA sources (and CPU mode's memory module) into build_dir: shared parts warm, students cold."""
    code = ("import json, sys, nbformat\n"
            "from pathlib import Path\n"
            "from course.grading.run.compile import compile_jobs\n"
            "from course.toolchain import load_cuda\n"
            "from course.device import cpu_mode\n"
            "for p in sorted(Path(sys.argv[1]).glob('*.ipynb')):\n"
            "    for j in compile_jobs(nbformat.read(p, as_version=4), gpu=not cpu_mode()):\n"
            "        try: load_cuda(j['cuda_src'], j['cpp_src'], j['funcs'], opt=j['opt'])\n"
            "        except Exception as e: print('warm-up build failed:', str(e)[:300])\n"
            "if cpu_mode():\n"
            "    from course.harness.children import memory_module; memory_module()\n")
    return subprocess.Popen([sys.executable, "-c", code, str(course / "release" / assignment)], env=env_for(build_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class Sampler:
    """Samples the GPUs' and the CPUs' utilization once a second while a path runs."""

    def __init__(self):
        self.gpu, self.cpu, self.stop = [], [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def _cpu_times(self):
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]

    def run(self):
        total, idle = self._cpu_times()
        while not self.stop.wait(1.0):
            t, i = self._cpu_times()
            if t > total:
                self.cpu.append(100.0 * (1 - (i - idle) / (t - total)))
            total, idle = t, i
            try:
                vals = [float(row[0]) for row in nvidia_smi("utilization.gpu", units=False, timeout=5) or ()]
            except ValueError:  # "[N/A]"
                vals = []
            if vals:
                self.gpu.append(sum(vals) / len(vals))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)

    def summary(self):
        """Mean and peak utilization, in percent."""
        def stats(v):
            return {"mean": round(sum(v) / len(v), 1), "max": round(max(v), 1)} if v else None
        return {"cpu": stats(self.cpu), "gpu": stats(self.gpu)}


def run_with_deadline(cmd, cwd, env, deadline, log_path):
    """Runs cmd; at the deadline sends it SIGINT (then SIGKILL). (exit code or None when stopped, seconds)."""
    t = time.perf_counter()
    with open(log_path, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=max(1, deadline - time.monotonic())), time.perf_counter() - t
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return None, time.perf_counter() - t


def nbgrader_path(course, assignment, students, build_dir, deadline, out):
    """Today's path: `nbgrader autograde` of the students, one after another; per student and per notebook seconds."""
    logfile = out / "nbgrader-autograde.log"
    cmd = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--create", "--force",
           "--Application.log_format=%(asctime)s.%(msecs)03d %(levelname)s %(message)s",
           "--Application.log_datefmt=%H:%M:%S"]
    with Sampler() as sampler:
        code, seconds = run_with_deadline(cmd, course, env_for(build_dir), deadline, logfile)
    # per notebook: from "Sanitizing <submitted/...>" to the next notebook or the student's permissions line
    events = []
    for line in logfile.read_text(errors="replace").splitlines():
        m = re.match(r"(\d\d:\d\d:\d\d\.\d+) \w+ (Sanitizing|Setting destination) ?(\S*)", line)
        if m:
            ts = datetime.strptime(m.group(1), "%H:%M:%S.%f")
            events.append((ts, m.group(2), m.group(3)))
    notebooks, per_student = {}, {}
    for (ts, kind, path), nxt in zip(events, events[1:]):
        if kind == "Sanitizing":
            parts = Path(path).parts
            student, name = parts[-3], Path(path).stem
            dt = (nxt[0] - ts).total_seconds() % 86400
            notebooks.setdefault(name, []).append(dt)
            per_student[student] = per_student.get(student, 0.0) + dt
    done = sorted(per_student)
    autograded = [s for s in students if (course / "autograded" / s / assignment).is_dir()]
    released = len(list((course / "release" / assignment).glob("*.ipynb")))
    complete = [s for s in autograded if len(list((course / "autograded" / s / assignment).glob("*.ipynb"))) == released]
    if code is None:  # stopped: the students it finished, by their own times (one still running was cut short)
        finished = [s for s in done if s in complete] or done[:1]
        per = sum(per_student[s] for s in finished) / max(1, len(finished))
        autograded = finished
    else:
        per = seconds / max(1, len(autograded))
    result = {"students": len(students), "finished": len(autograded), "seconds": round(seconds, 1),
              "stopped_at_budget": code is None, "exit": code, "per_student": round(per, 1),
              "student_seconds": {s: round(per_student[s], 1) for s in done},
              "notebook_mean_seconds": {n: round(sum(v) / len(v), 1) for n, v in sorted(notebooks.items())},
              "utilization": sampler.summary()}
    return result


def course_path(course, assignment, build_dir, deadline, out, workers=None, verify=False):
    """The new path: `python -m course grade` of the whole class; seconds per student and where they go."""
    summary_file = out / "course-grade.json"
    cmd = [sys.executable, "-m", "course", "grade", assignment, "--json", str(summary_file)]
    cmd += ["--audit"] if verify else []
    cmd += ["--workers", str(workers)] if workers else []
    traced = out / "trace.jsonl"
    traced.unlink(missing_ok=True)
    with Sampler() as sampler:
        code, seconds = run_with_deadline(cmd, course, env_for(build_dir, {"COURSE_TRACE": str(traced)}), deadline,
                                          out / "course-grade.log")
    ledger = course / "autograded" / ".course" / assignment / "ledger.jsonl"
    entries = [json.loads(x) for x in ledger.read_text().splitlines()] if ledger.exists() else []
    graded = [e for e in entries if e["status"] == "graded"]
    result = {"finished": len(graded),
              "failed": {e["student"]: e.get("reason", "?") for e in entries if e["status"] != "graded"},
              "seconds": round(seconds, 1), "stopped_at_budget": code is None, "exit": code,
              "per_student": round(seconds / max(1, len(graded)), 1), "utilization": sampler.summary(),
              "scores": {e["student"]: e.get("score") for e in graded}}
    if summary_file.exists():
        s = json.loads(summary_file.read_text())
        result.update(workers=s["workers"], gpus=s["gpus"], warm_kernels=s.get("warm_kernels"),
                      timing={k: round(v, 1) for k, v in s["timing"].items()})
    else:  # stopped at the budget: the ledger says what each student took
        result["timing"] = {"student_mean": round(sum(e["seconds"] for e in graded) / max(1, len(graded)), 1)}
    stages = [e.get("timing", {}) for e in graded]
    if stages and all("autograde" in t for t in stages):
        result["timing"]["autograde_process_mean"] = round(sum(t["autograde"] for t in stages) / len(stages), 1)
    if traced.exists():
        result["check_phases"] = check_phases(traced)
    return result


PHASES = (  # (name, from mark, to mark) in a check's trace (course/harness/trace.py)
    ("child start", "run asked", "run started"), ("load", "run started", "run loaded"), ("run", "run loaded", "run ran"),
    ("save", "run ran", "run saved"), ("child end", "run saved", "run ended"),
    ("judge start", "judge asked", "judge started"), ("judge", "judge started", "judge done"),
    ("judge end", "judge done", "judge ended"), ("build", "build asked", "build ended"),
    ("speed", "speed asked", "speed ended"))


def check_phases(path, top=12):
    """Where the slowest test cells' time goes, from the trace: per cell (grade_id), the mean seconds a student of
    the cell, of the kernel's answers to the judge (ask), and of each phase of the cell's checks' children."""
    import statistics
    marks = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    checks, cells, asks = {}, {}, {}
    for m in marks:
        if m["what"].startswith(("cell ", "ask", "answered")):
            if m["what"] in ("cell judged", "ask"):
                (cells if m["what"] == "cell judged" else asks).setdefault(m["pid"], []).append([m["key"], m["t"], None])
            else:
                open_ = [x for x in (cells if m["what"] == "cell done" else asks).get(m["pid"], []) if x[2] is None]
                if open_:
                    open_[-1][2] = m["t"]
        else:
            check = checks.setdefault(m["key"], {})
            check.setdefault(m["what"], m["t"])
            if m["what"].endswith(" asked"):
                check["pid"] = m["pid"]
    rows = {}
    for pid, spans in cells.items():
        for grade_id, t0, t1 in spans:
            if t1 is None:
                continue
            row = rows.setdefault(grade_id, {"seconds": [], "ask": [], **{name: [] for name, _, _ in PHASES}})
            row["seconds"].append(t1 - t0)
            row["ask"].append(sum(b - a for _, a, b in asks.get(pid, []) if b and t0 <= a <= t1))
            mine = [c for c in checks.values() if c.get("pid") == pid and t0 <= min(
                v for k, v in c.items() if k != "pid") <= t1]
            for name, a, b in PHASES:
                row[name].append(sum(c[b] - c[a] for c in mine if a in c and b in c))
    table = [{"cell": grade_id, "students": len(v["seconds"]),
              **{k: round(statistics.mean(x), 2) for k, x in v.items()}} for grade_id, v in rows.items()]
    return sorted(table, key=lambda r: -r["seconds"])[:top]


def verify_sample(course, assignment, students, build_dir, deadline, out, workers=None):
    """`course verify`'s clean re-run of a sample of graded students, timed alone (`course grade --audit` runs it per student)."""
    cmd = [sys.executable, "-m", "course", "verify", assignment] + [x for s in students for x in ("--student", s)]
    cmd += ["--workers", str(workers or os.cpu_count())]
    with Sampler() as sampler:
        code, seconds = run_with_deadline(cmd, course, env_for(build_dir), deadline, out / "course-verify.log")
    text = (out / "course-verify.log").read_text(errors="replace")
    found = re.search(r"(\d+) tests re-run in clean processes; (\d+) disagree", text)
    return {"students": len(students), "seconds": round(seconds, 1), "per_student": round(seconds / len(students), 1),
            "stopped_at_budget": code is None, "tests": int(found.group(1)) if found else None,
            "disagreements": int(found.group(2)) if found else None, "utilization": sampler.summary()}


def where_time_goes(course, top=12):
    """The cells that took longest, mean seconds over the graded students: [(notebook, cell, seconds, students)].

    A cell the kernel ran has nbclient's timestamps; a test cell the judge ran has its judge_seconds (trusted.py)."""
    import nbformat
    seconds = {}
    for path in sorted(Path(course, "autograded").glob("*/*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            meta, ex = cell.metadata, cell.metadata.get("execution", {})
            if "judge_seconds" in meta.get("course", {}):
                s = meta["course"]["judge_seconds"]
            elif "iopub.execute_input" in ex and "shell.execute_reply" in ex:
                s = (datetime.fromisoformat(ex["shell.execute_reply"].replace("Z", "+00:00"))
                     - datetime.fromisoformat(ex["iopub.execute_input"].replace("Z", "+00:00"))).total_seconds()
            else:
                continue
            first = cell.source.splitlines()[0][:50] if cell.source else ""
            label = meta.get("nbgrader", {}).get("grade_id") or f"cell {i}: {first}"
            seconds.setdefault((path.stem, label), []).append(s)
    rows = [(nb, label, round(sum(v) / len(v), 2), len(v)) for (nb, label), v in seconds.items()]
    return sorted(rows, key=lambda r: -r[2])[:top]


def kernel_starts(course, build_dir, timeout=300):
    """Seconds to a kernel that has imported torch and the course: as nbgrader starts one, and forked warm."""
    code = r'''
import os, sys, time, nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook
from course.grading.warm import WarmKernels, WarmKernelManager
nb = lambda: new_notebook(cells=[new_code_cell("import torch, course\nfrom course import check_rgb2grey, check_rgb2grey_cuda, load_cuda")],
                          metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
out = {}
t = time.perf_counter(); w = WarmKernels(); w.wait_ready(); out["warm process ready"] = time.perf_counter() - t
for mode in ("cold", "warm", "cold", "warm"):
    if mode == "warm": os.environ.update(w.env())
    else: os.environ.pop("COURSE_WARM_KERNELS", None)
    t = time.perf_counter()
    NotebookClient(nb(), kernel_manager_class=WarmKernelManager).execute()
    out.setdefault(mode, []).append(time.perf_counter() - t)
w.close()
import json; print(json.dumps({k: (round(min(v), 2) if isinstance(v, list) else round(v, 2)) for k, v in out.items()}))
'''
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=course, env=env_for(build_dir), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout:.0f} s"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": proc.stderr[-500:]}


def slurm_seconds(text):
    """Slurm's RunTime ('1-02:03:04', '00:01:17') in seconds."""
    days, _, clock = text.rpartition("-")
    h, m, sec = (int(x) for x in clock.split(":"))
    return (int(days) if days else 0) * 86400 + h * 3600 + m * 60 + sec


def slurm_jobs(cluster, job):
    """{array task (or 'job'): {state, seconds}} of a finished job, from scontrol (the cluster keeps them 10 min)."""
    found = {}
    for line in cluster.run("scontrol", "-o", "show", "job", str(job)).stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        task = fields.get("ArrayTaskId", "job")
        found[int(task) if task.isdigit() else task] = {"state": fields.get("JobState"),
                                                         "seconds": slurm_seconds(fields.get("RunTime", "0:0:0"))}
    return dict(sorted(found.items(), key=str))


def slurm_path(course, assignment, tasks, build_dir, out, timeout):
    """The class graded through a one-node Slurm started here: `course slurm grade --tasks N --cpu`, wall and shard seconds."""
    from course.grading.cluster.localslurm import LocalCluster, missing_prerequisite
    reason = missing_prerequisite()
    if reason:
        return {"error": reason}
    cluster = LocalCluster(out / "slurm-cluster", cpus=os.cpu_count())
    try:
        cluster.start()
        env = {**env_for(build_dir), "SLURM_CONF": str(cluster.conf)}
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "course", "slurm", "grade", assignment, "--tasks", str(tasks),
                               "--cpu"], cwd=course, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return {"error": proc.stdout + proc.stderr}
        jobs = json.loads((course / "slurm" / assignment / "submitted.json").read_text())
        cluster.wait_jobs([jobs["grade_job"], jobs["merge_job"]], timeout)
        wall = time.perf_counter() - t
        shards, merged = slurm_jobs(cluster, jobs["grade_job"]), slurm_jobs(cluster, jobs["merge_job"])
    finally:
        cluster.stop()
    state = course / "autograded" / ".course" / assignment
    for i, shard in shards.items():
        ledger = state / f"shard-{i}-of-{tasks}" / "ledger.jsonl"
        shard["students"] = len(ledger.read_text().splitlines()) if ledger.exists() else 0
    entries = [json.loads(x) for x in (state / "ledger.jsonl").read_text().splitlines()] \
        if (state / "ledger.jsonl").exists() else []
    return {"tasks": tasks, "node_cpus": os.cpu_count(), "seconds": round(wall, 1), "shards": shards,
            "merge_seconds": merged.get("job", {}).get("seconds"),
            "scores": {e["student"]: e.get("score") for e in entries if e["status"] == "graded"},
            "failed": {e["student"]: e.get("reason", "?") for e in entries if e["status"] != "graded"},
            "report": (course / "slurm" / assignment / "report.txt").read_text()}


def slurm_benchmark(args):
    """--slurm N: the synthetic class graded by one `course grade` and through a local Slurm in N shards; same scores?"""
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="course-slurm-bench-"))
    out = work / "logs"
    out.mkdir(parents=True, exist_ok=True)
    result = {"host": host(), "args": vars(args), "load_average_at_start": os.getloadavg()}
    log(f"host: {result['host']}")
    base = work / "release-course"
    shutil.rmtree(base, ignore_errors=True)
    shutil.copytree(ROOT / "source", base / "source")
    shutil.copy(ROOT / "nbgrader_config.py", base)
    subprocess.run([sys.executable, "-m", "course", "release", args.assignment, "--no-compile"], cwd=base, check=True,
                   env=env_for(work / "unused-builds"), capture_output=True)
    examples = bases(args.assignment, args.tamper)
    names = sorted(examples)
    ids = [f"s{i:02d}-{names[i % len(names)]}" for i in range(args.size)]  # as main() names them
    klass = {s: vary(examples[s.split("-", 1)[1]], s) for s in ids} if ids else dict(examples)
    folders = {"one_host": work / "one-host", "slurm": work / "slurm"}
    for key, folder in folders.items():
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(base, folder)
        write_class(folder, args.assignment, klass)
    builds = {key: work / f"builds-{key}" for key in folders}
    for w in [warm_up(base, args.assignment, b) for b in builds.values()]:
        w.communicate()
    log(f"one host: python -m course grade of {len(klass)} students ...")
    deadline = time.monotonic() + 3 * 3600
    result["one_host"] = course_path(folders["one_host"], args.assignment, builds["one_host"], deadline, out,
                                     args.workers)
    log(json.dumps({k: result["one_host"][k] for k in ("finished", "seconds", "per_student", "timing")}))
    log(f"Slurm: python -m course slurm grade {args.assignment} --tasks {args.slurm} --cpu on a one-node cluster ...")
    result["slurm"] = slurm_path(folders["slurm"], args.assignment, args.slurm, builds["slurm"], out, 3 * 3600)
    a, b = result["one_host"].get("scores"), result["slurm"].get("scores")
    result["same_scores"] = bool(a) and a == b
    result["load_average_at_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    log("")
    log(f"== {args.assignment}, {len(klass)} students, {result['host']['cores']} cores, "
        f"{result['host'].get('gpu') or 'CPU mode'}")
    log(f"one host (course grade, {result['one_host'].get('workers')} at once): {result['one_host']['seconds']} s, "
        f"{result['one_host']['finished']} graded")
    if "error" in result["slurm"]:
        log(f"Slurm: not run: {result['slurm']['error']}")
        return
    s = result["slurm"]
    log(f"Slurm ({s['tasks']} shards on one {s['node_cpus']}-CPU node, 1 CPU a shard): {s['seconds']} s from "
        f"submission to the merge's end, {len(s['scores'])} graded, {len(s['failed'])} failed")
    for i, shard in s["shards"].items():
        log(f"  shard {i}/{s['tasks']}: {shard['students']} students in {shard['seconds']} s ({shard['state']})")
    log(f"  merge and report: {s['merge_seconds']} s")
    log(f"same scores as one host: {result['same_scores']}" + ("" if result["same_scores"] else
        f" (differ: {sorted(k for k in set(a or {}) | set(b or {}) if (a or {}).get(k) != (b or {}).get(k))})"))
    log(f"logs and course folders: {work}")


def main():
    """Runs both paths and prints and saves the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--assignment", default="grayscale")
    p.add_argument("--class", dest="size", type=int, default=30,
                   help="students in the synthetic class (0: the example students themselves)")
    p.add_argument("--tamper", action="store_true", help="add tests/tamper/<assignment> to the example students")
    p.add_argument("--workers", type=int, help="course grade's students at once (default: its own, one per core)")
    p.add_argument("--verify-sample", type=int, default=0, help="students whose audit (clean re-run) is timed")
    p.add_argument("--repeat", type=int, default=1, help="grade the class this many times, each in fresh folders")
    p.add_argument("--budget", type=float, default=390, help="seconds for the whole run; a path running past it "
                   "is stopped and measured on the students it finished")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--today-from", help="take today's path's figures from this earlier --json file (same host) "
                   "instead of running it again: the whole budget goes to course grade")
    p.add_argument("--course-only", action="store_true", help="time course grade alone (no figure for today's "
                   "path): the whole budget goes to the class")
    p.add_argument("--keep", help="keep the course folders here")
    p.add_argument("--slurm", type=int, metavar="TASKS", help="instead: the class graded by one course grade and "
                   "through a one-node Slurm started here in TASKS shards (CPU mode), with the scores compared")
    args = p.parse_args()
    if args.slurm:
        return slurm_benchmark(args)
    start = time.monotonic()
    deadline = start + args.budget
    result = {"host": host(), "args": vars(args)}
    log(f"host: {result['host']}")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="course-grading-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    out = work / "logs"
    out.mkdir(exist_ok=True)

    def save():
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))

    # one release, two course folders: today's (the example students) and the class's
    base = work / "release-course"
    shutil.rmtree(base, ignore_errors=True)
    shutil.copytree(ROOT / "source", base / "source")
    shutil.copy(ROOT / "nbgrader_config.py", base)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "course", "release", args.assignment, "--no-compile"], cwd=base,
                          env=env_for(work / "unused-builds"), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"release failed:\n{proc.stdout}{proc.stderr}")
    result["release_seconds"] = round(time.perf_counter() - t, 1)
    examples = bases(args.assignment, args.tamper)
    today, new = work / "today", work / "course"
    for folder in (today, new):
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(base, folder)
    write_class(today, args.assignment, examples)
    if args.size:  # s00-alice, s01-bob, s02-carol, ...: graded in name order, any prefix of the class is a fair mix
        names = sorted(examples)
        ids = [f"s{i:02d}-{names[i % len(names)]}" for i in range(args.size)]
        klass = {s: vary(examples[s.split("-", 1)[1]], s) for s in ids}
    else:
        klass = dict(examples)
    write_class(new, args.assignment, klass)
    log(f"released {args.assignment} in {result['release_seconds']} s; today's path grades {', '.join(examples)}; "
        f"course grade grades {len(klass)} students")

    builds = {"course": work / "builds-course"} if args.today_from or args.course_only else \
        {"today": work / "builds-today", "course": work / "builds-course"}
    t = time.perf_counter()
    warming = [warm_up(base, args.assignment, b) for b in builds.values()]
    for w in warming:
        text, _ = w.communicate()
        if text.strip():
            log(text.strip()[-500:])
    result["warm_up_seconds"] = round(time.perf_counter() - t, 1)
    log(f"build folders warmed with the released stub in {result['warm_up_seconds']} s")
    save()

    # the time left is shared: today's path first (it is the slow one), the class after
    share = (deadline - time.monotonic()) * 0.55
    if args.course_only:
        result["nbgrader"] = {"finished": 0, "skipped": "--course-only"}
    elif args.today_from:
        earlier = json.loads(Path(args.today_from).read_text())
        if earlier["args"]["assignment"] != args.assignment:
            sys.exit(f"--today-from {args.today_from} timed {earlier['args']['assignment']}, not {args.assignment}")
        result["nbgrader"] = {**earlier["nbgrader"], "from": args.today_from}
        log(f"today's path: from {args.today_from}")
    else:
        log(f"today's path: nbgrader autograde of {len(examples)} students, one after another ...")
        result["nbgrader"] = nbgrader_path(today, args.assignment, sorted(examples), builds["today"],
                                           time.monotonic() + share, out)
    log(json.dumps(result["nbgrader"], indent=1))
    save()

    reserve = 60 if args.verify_sample else 15
    log(f"the new path: python -m course grade of {len(klass)} students ...")
    result["course"] = course_path(new, args.assignment, builds["course"], deadline - reserve, out, args.workers)
    log(json.dumps(result["course"], indent=1))
    result["slowest_cells"] = where_time_goes(new)
    log("slowest cells (mean seconds a student): " + "; ".join(f"{nb} {label} {s}" for nb, label, s, _ in
                                                               result["slowest_cells"]))
    for row in result["course"].get("check_phases", []):
        log("  " + ", ".join(f"{k} {v}" for k, v in row.items() if v or k == "cell"))
    save()
    runs = [result["course"]]
    for k in range(2, args.repeat + 1):  # the stress run: the same class again, fresh course and build folders
        again, fresh = work / f"course-{k}", work / f"builds-course-{k}"
        shutil.rmtree(again, ignore_errors=True)
        shutil.copytree(base, again)
        write_class(again, args.assignment, klass)
        warm_up(base, args.assignment, fresh).communicate()
        log(f"run {k} of {args.repeat}: python -m course grade of {len(klass)} students, fresh folders ...")
        runs.append(course_path(again, args.assignment, fresh, deadline - reserve, out, args.workers))
        log(json.dumps({key: runs[-1][key] for key in ("finished", "failed", "seconds", "per_student")}))
    if args.repeat > 1:
        result["runs"] = [{**{key: r[key] for key in ("finished", "failed", "seconds", "per_student", "stopped_at_budget")},
                           "scores_by_example": by_example(r["scores"])} for r in runs]
        same = all(r["scores_by_example"] == result["runs"][0]["scores_by_example"] for r in result["runs"])
        log(f"stress: {len(runs)} runs, {sum(len(r['failed']) for r in runs)} students failed in all, every copy of an "
            f"example scored {'the same in every run' if same else 'DIFFERENTLY across runs'}")
        save()

    if args.verify_sample and deadline - time.monotonic() > 45:
        sample = sorted(result["course"]["scores"])[:args.verify_sample]
        if sample:
            log(f"the clean re-run (course verify) of {len(sample)} graded students ...")
            result["verify"] = verify_sample(new, args.assignment, sample, builds["course"], deadline - 10, out,
                                             args.workers)
            log(json.dumps(result["verify"], indent=1))
            save()
    if deadline - time.monotonic() > 40:
        result["kernel_start"] = kernel_starts(new, builds["course"], timeout=deadline - time.monotonic())
        log(f"kernel with torch and the course imported, seconds: {result['kernel_start']}")

    # the grades must be those of the example each student copies
    expected = by_example(result["course"]["scores"])
    today_scores = {}
    try:
        from nbgrader.api import Gradebook
        with Gradebook(f"sqlite:///{today / 'gradebook.db'}") as gb:
            for s in examples:
                try:
                    today_scores[s] = gb.find_submission(args.assignment, s).score
                except Exception:  # noqa: B902 (not graded before the budget ran out)
                    pass
    except Exception as e:  # noqa: B902
        today_scores = {"error": str(e)}
    result["scores"] = {"today": today_scores, "course_by_example": expected}
    # a path that finished no student within the budget has no figure (its elapsed time is not a student's)
    a, b = (result[k]["per_student"] if result[k]["finished"] else None for k in ("nbgrader", "course"))
    result["speedup"] = round(a / b, 1) if a and b else None
    result["total_seconds"] = round(time.monotonic() - start, 1)
    save()
    log("")
    log(f"== {args.assignment} on {result['host'].get('gpu') or 'CPU (CPU mode)'}, {result['host']['cores']} cores")
    if not args.course_only:
        log(f"today (nbgrader autograde, one student after another): {a} s a student "
            f"({result['nbgrader']['finished']} students in {result['nbgrader']['seconds']} s)")
    log(f"course grade ({result['course'].get('workers', '?')} students at once, warm kernels "
        f"{result['course'].get('warm_kernels')}): {b} s a student ({result['course']['finished']} students in "
        f"{result['course']['seconds']} s)")
    if not args.course_only:
        log(f"speed-up: {result['speedup']}x" if result["speedup"] else
            "speed-up: no figure (a path finished no student within the budget: give it more with --budget)")
    for k, r in enumerate(runs, 1):
        log(f"run {k}: {r['finished']} graded, {len(r['failed'])} failed, {r['per_student']} s a student"
            + "".join(f"\n  FAILED {s}: {why}" for s, why in sorted(r["failed"].items())))
    if "verify" in result:
        log(f"clean re-run (course verify, both paths need it): {result['verify']['per_student']} s a student "
            f"over {result['verify']['students']} students")
    log(f"scores: today {today_scores}; course grade, by the example copied: {result['scores']['course_by_example']}")
    log(f"logs and course folders: {work}; total {result['total_seconds']} s")


if __name__ == "__main__":
    main()

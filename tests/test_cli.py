"""The instructor's commands, `python -m course ...`, on CPU: each command, its bad inputs, and grades equal to nbgrader's.

The fast tests call the pieces directly; the slow ones release grayscale, collect a class from an LMS zip,
grade it (stopped halfway, then resumed), and judge the outcome: the gradebook, the ledger, the feedback and
the export, never the lines the commands happen to log.
"""
import ast
import csv
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course.device import cpu_mode
from course.grading.nbgrader import seeds
from course.grading.commands.collect import read_download
from course.grading.run.compile import compile_jobs
from course.grading.reports.exercises import failure_message
from course.grading.nbgrader.feedback import HideHiddenTests
from course.grading.run.gradebook import grades
from course.grading.run.plan import in_shard
from course.grading.run.layout import CourseError
from course.grading.run.merge import remove_student
from course.grading.commands.examples import write_submissions
from course.grading.run.verify import disagreement_line, verification_source
from tests.support import ROOT, SECRET, command_env, course, course_folder, nbgrader
from tests.test_pipeline import EXPECTED_PASSES, L0, L3, L4

COMMANDS = ("doctor", "release", "collect", "grade", "verify", "merge", "feedback", "export", "check", "new", "add-test",
            "examples")
CLASS = ("alice", "bob", "carol", "dave", "mallory")  # examples/ and tests/tamper/: right, mistakes, nothing, attacks
NOTEBOOKS = (L0, "02_L1_run_kernel", "03_L2_blk_kernel", L3, L4)


def snapshot(folder):
    """Every file under folder with its bytes: to show a command changed nothing."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def lms_zip(path, submitted, students, style="canvas"):
    """A zip as an LMS hands it out: Canvas's flat student_id_id_notebook.ipynb, or a folder per student."""
    with zipfile.ZipFile(path, "w") as z:
        for i, s in enumerate(students):
            for nb in sorted((Path(submitted) / s / "grayscale").glob("*.ipynb")):
                name = f"{s}_{1000 + i}_{2000 + i}_{nb.name}" if style == "canvas" else f"{s}/{nb.name}"
                z.write(nb, name)
    return path


# ---- fast: the pieces, and bad input


def test_every_command_has_help():
    for name in COMMANDS:
        proc = subprocess.run([sys.executable, "-m", "course", name, "--help"], capture_output=True, text=True)
        assert proc.returncode == 0 and "usage: python -m course " + name in proc.stdout, proc.stderr


def _resolves(name):
    """True when a dotted name is a module of the course or a name in one."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def test_docstrings_and_help_name_only_modules_and_functions_that_exist():
    stale = []
    for path in sorted([*(ROOT / "course").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                stale += [f"{path.relative_to(ROOT)}:{node.lineno} {m}" for m in
                          re.findall(r"(?<![\w/.])course(?:\.[A-Za-z_]\w*)+", node.value) if not _resolves(m)]
    assert not stale


def test_the_command_line_starts_without_torch():
    # an instructor's `course collect`, `merge` or `--help` should not wait seconds for PyTorch to load
    script = "import sys, course.grading.cli; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", script], timeout=120).returncode == 0


def test_personal_seeds_differ_per_student_and_repeat_exactly():
    secret = b"s"
    a, b = seeds.personal_seed(4021, "alice", secret), seeds.personal_seed(4021, "bob", secret)
    assert a != b and a == seeds.personal_seed(4021, "alice", secret) and a != seeds.personal_seed(4021, "alice", b"t")
    source = '"""docstring, seed=1"""\n### BEGIN HIDDEN TESTS\ncheck_rgb2grey(rgb2grey_py, "random", seed=4021)\n'
    assert seeds.personal_source(source, "alice", secret) == source.replace("seed=4021", f"seed={a}")
    assert seeds.personal_source(source, "alice", None) == source  # no secret: the seeds as written


def test_the_clean_rerun_takes_its_tests_with_the_seeds_as_written_or_the_students_own(tmp_path):
    root = course_folder(tmp_path / "course", released=False)
    assert verification_source(root, "grayscale", "alice", None, tmp_path) == root / "source" / "grayscale"

    def hidden_seed(folder):
        nb = nbformat.read(folder / f"{L0}.ipynb", as_version=4)
        return int(re.search(r"seed=(\d+)", next(c.source for c in nb.cells if "seed=" in c.source)).group(1))
    written = hidden_seed(root / "source" / "grayscale")
    own = verification_source(root, "grayscale", "alice", SECRET.encode(), tmp_path / "alice")
    assert hidden_seed(own) == seeds.personal_seed(written, "alice", SECRET.encode()) != written


def test_a_disagreement_reads_as_one_line_naming_the_test_and_both_verdicts():
    row = ("bob", L0, "rgb2grey_py_hidden_sizes", True, False, "AssertionError: 3 pixels are wrong\nmore")
    assert disagreement_line(row) == (f"bob  {L0}/rgb2grey_py_hidden_sizes: notebook passed, clean re-run failed: "
                                      "AssertionError: 3 pixels are wrong")
    from course.grading.commands.grade import report
    summary = {"assignment": "grayscale", "students": 1, "unchanged": 0, "graded": ["bob"], "workers": 1,
               "failed": {}, "kernel_stopped": {}, "timing": {}, "disagreements": [row]}
    assert f"    {disagreement_line(row)}" in report(summary).splitlines()


def test_feedback_shows_a_hidden_tests_verdict_but_not_its_code_or_the_courses_frames():
    trace = ["\x1b[31m-----\x1b[39m", "AssertionError   Traceback (most recent call last)",
             "\x1b[36mCell\x1b[39m In[3], line 3\n----> 3 check_rgb2grey(rgb2grey_py, \"random\", seed=7351)",
             f"\x1b[36mFile \x1b[39m\x1b[32m{ROOT}/course/topics/grayscale.py:319\x1b[39m, in check_rgb2grey",
             "\x1b[31mAssertionError\x1b[39m: 3 of 259 pixels are wrong"]
    meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": "t", "points": 1, "locked": True}}
    hidden = new_code_cell('"""hidden sizes"""\n### BEGIN HIDDEN TESTS\ncheck_rgb2grey(rgb2grey_py, "random", '
                           'seed=7351)\n### END HIDDEN TESTS', metadata=meta)
    visible = new_code_cell('"""tiny"""\ncheck_rgb2grey(rgb2grey_py, "tiny")', metadata=dict(meta))
    for cell in (hidden, visible):
        cell.outputs = [new_output("error", ename="AssertionError", evalue="3 of 259 pixels are wrong",
                                   traceback=list(trace))]
    nb, _ = HideHiddenTests().preprocess(new_notebook(cells=[hidden, visible]), {})
    assert "seed" not in nb.cells[0].source and "HIDDEN" not in nb.cells[0].source
    assert nb.cells[0].outputs[0].traceback == trace[-1:]
    assert [t for t in nb.cells[1].outputs[0].traceback if "course/" in t] == []
    assert any("Cell" in t for t in nb.cells[1].outputs[0].traceback)


def test_in_the_notebook_a_failed_check_shows_the_call_and_the_message_only(capsys):
    from IPython.core.interactiveshell import InteractiveShell
    from course.tracebacks import install_student_tracebacks
    shell = InteractiveShell.instance()
    install_student_tracebacks(shell)
    shell.run_cell("import torch\nfrom course import check_rgb2grey\n"
                   "def grey(x):\n    return torch.zeros(x.shape[1:], dtype=torch.uint8)")
    shell.run_cell('check_rgb2grey(grey, "tiny")')
    shown = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert 'check_rgb2grey(grey, "tiny")' in shown and "1 of 1 pixels are wrong" in shown
    assert "course/" not in shown


def test_importing_the_course_in_a_notebook_hides_its_frames():
    script = ("from IPython.core.interactiveshell import InteractiveShell\n"
              "shell = InteractiveShell.instance()\n"
              "shell.run_cell('import torch\\nfrom course import check_rgb2grey\\n"
              "def grey(x):\\n    return torch.zeros(x.shape[1:], dtype=torch.uint8)')\n"
              "shell.run_cell('check_rgb2grey(grey, \"tiny\")')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    assert 'check_rgb2grey(grey, "tiny")' in shown and "1 of 1 pixels are wrong" in shown
    assert "course/" not in shown, shown


def test_compile_jobs_reads_the_cuda_sources_without_running_the_notebook():
    jobs = compile_jobs(nbformat.read(ROOT / "release" / "grayscale" / f"{L3}.ipynb", as_version=4))
    assert [j["funcs"] for j in jobs] == [["rgb_to_grayscale"]]
    assert "// YOUR CODE HERE" in jobs[0]["cuda_src"] and jobs[0]["cpp_src"].startswith("torch::Tensor")


def test_shards_split_the_class_once():
    students = [f"s{i}" for i in range(50)]
    shards = [{s for s in students if in_shard(s, (i, 3))} for i in (1, 2, 3)]
    assert sum(map(len, shards)) == 50 and set().union(*shards) == set(students) and all(shards)


def test_the_class_failed_message_groups_the_same_mistake():
    cell = {"outputs": [{"output_type": "error", "ename": "AssertionError",
                         "evalue": "rgb2grey_py: 148 of 11,160 pixels are wrong for a 72x155 image.\n  first at row 1\n"
                                   "Hint: check the weights; the exercise's are 0.2989, 0.5870, 0.1140."}]}
    other = json.loads(json.dumps(cell).replace("148 of 11,160", "3 of 259").replace("72x155", "7x37"))
    assert failure_message(cell) == failure_message(other) == \
        "rgb2grey_py: N of N pixels are wrong for a NxN image. | hint: check the weights"


def test_collect_reads_canvas_and_folder_layouts(tmp_path):
    staged = tmp_path / "staged"
    write_submissions(ROOT / "examples", ROOT / "release", staged, "grayscale")
    names = list(NOTEBOOKS)
    canvas = read_download(lms_zip(tmp_path / "c.zip", staged, ["alice", "bob"]), "grayscale", names)
    assert sorted({(i.student, i.notebook) for i in canvas}) == [(s, n) for s in ("alice", "bob") for n in names]
    one = read_download(lms_zip(tmp_path / "f.zip", staged, ["carol"], style="folders"), "grayscale", names)
    assert {i.student for i in one} == {"carol"} and len(one) == len(NOTEBOOKS)


@pytest.mark.timeout(600)
def test_collect_refuses_bad_input_and_changes_nothing(tmp_path):
    root = course_folder(tmp_path / "course")
    staged = tmp_path / "staged"
    write_submissions(ROOT / "examples", ROOT / "release", staged, "grayscale")
    good = lms_zip(tmp_path / "good.zip", staged, ["alice"])
    course("collect", "grayscale", str(good), cwd=root)
    before = snapshot(root / "submitted")
    course("collect", "grayscale", str(good), cwd=root)  # the same download again: nothing changes, timestamps kept
    assert snapshot(root / "submitted") == before
    corrupt = tmp_path / "corrupt.zip"
    corrupt.write_bytes(good.read_bytes()[:300])
    twice = tmp_path / "twice.zip"
    shutil.copy(good, twice)
    with zipfile.ZipFile(twice, "a") as z:
        z.write(staged / "bob" / "grayscale" / f"{L0}.ipynb", f"alice_9_9_{L0}.ipynb")  # a second L0 for alice
        z.writestr("bob_9_9_01_L0_loop.ipynb", "{ not json")
        z.writestr("bob_9_9_report.pdf", "%PDF-1.4")
    cases = {
        "does not exist": ("collect", "grayscale", str(tmp_path / "missing.zip")),
        "not a readable zip": ("collect", "grayscale", str(corrupt)),
        "2 submissions of 01_L0_loop": ("collect", "grayscale", str(twice)),
        "not a Jupyter notebook": ("collect", "grayscale", str(twice)),
        "report.pdf: not a notebook": ("collect", "grayscale", str(twice)),
        "no assignment 'nope'": ("collect", "nope", str(good)),
    }
    for words, args in cases.items():
        proc = course(*args, cwd=root, check=False)
        assert proc.returncode == 2 and words in proc.stderr, (words, proc.stderr)
        assert snapshot(root / "submitted") == before
    for args, words in ((("grade", "nope"), "no assignment 'nope'"), (("grade", "grayscale", "--shard", "3/2"), "--shard"),
                        (("grade", "grayscale", "--student", "zoe"), "no submission of grayscale from zoe"),
                        (("feedback", "grayscale"), "no graded submissions"), (("export", "nope"), "no assignment"),
                        (("merge", "grayscale"), "no shards"), (("release", "nope"), "no assignment 'nope'")):
        proc = course(*args, cwd=root, check=False)
        assert proc.returncode == 2 and words in proc.stderr, (args, proc.stderr)
    assert snapshot(root / "submitted") == before


@pytest.mark.timeout(900)
def test_doctor_says_this_machine_can_grade(tmp_path):
    proc = course("doctor", cwd=course_folder(tmp_path))
    assert "ok    python" in proc.stdout and "ok    a tiny kernel compiled and ran" in proc.stdout
    assert "ok    triton " in proc.stdout and "ok    a tiny Triton kernel " in proc.stdout
    assert proc.stdout.strip().endswith("ready to grade")


def test_doctor_checks_triton_its_version_against_torchs_and_a_tiny_kernel(monkeypatch, capsys):
    import triton

    from course.grading.commands import doctor
    monkeypatch.setattr(doctor, "triton_pin", lambda: triton.__version__)
    report = doctor.Report()
    doctor.check_triton(report)
    out = capsys.readouterr().out
    assert report.failed == 0 and f"ok    triton {triton.__version__}" in out
    assert "ok    a tiny Triton kernel " + ("interpreted (CPU mode)" if cpu_mode() else "compiled for") in out
    monkeypatch.setattr(doctor, "triton_pin", lambda: "2.0.0")  # a torch built with another triton
    doctor.check_triton(report, run_kernel=False)
    assert report.failed == 1 and "but torch was built with triton 2.0.0" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "triton", None)  # not installed (macOS, Windows)
    doctor.check_triton(report)
    assert report.failed == 2 and "FAIL  triton cannot be imported" in capsys.readouterr().out


FAKE_SMI = """#!/bin/sh
case "$*" in
  *--id=GPU-1*--query-gpu=clocks.sm*) printf '1980, 2619, 1980, 41, 120.5, 550.54.15\\n' ;;
  *--query-gpu=index*) printf '0\\n1\\n' ;;
  *--query-gpu=name,driver_version,memory.total*) printf 'NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB\\n' ;;
  *) echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" >&2; exit 9 ;;
esac
"""


def test_grading_and_doctor_read_the_gpus_from_nvidia_smi(tmp_path, monkeypatch):
    from course.device import nvidia_smi
    from course.grading.commands import doctor
    from course.grading.run import pool
    (tmp_path / "nvidia-smi").write_text(FAKE_SMI)
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("COURSE_CPU_MODE", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert pool.visible_gpus() == ["0", "1"]
    assert doctor.gpus() == [("NVIDIA H100 80GB HBM3", "550.54.15", "81559 MiB")]
    assert nvidia_smi("clocks.sm", "clocks.mem", units=False, gpu="GPU-1") == [["1980", "2619", "1980", "41", "120.5",
                                                                           "550.54.15"]]  # one GPU: speed.gpu_facts
    assert nvidia_smi("utilization.gpu", units=False) is None  # the driver not loaded
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert nvidia_smi("index") == [] and pool.visible_gpus() == [] and doctor.gpus() == []


# ---- slow: a class released, collected, graded (stopped halfway and resumed), fed back, exported

def ledger(root):
    path = root / "autograded" / ".course" / "grayscale" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def graded(tmp_path_factory):
    """A course folder: grayscale released and collected from a Canvas zip, graded, stopped after one student, resumed."""
    tmp = tmp_path_factory.mktemp("cli")
    root = course_folder(tmp / "course", released=False)
    proc = course("release", "grayscale", cwd=root)
    assert "04_L3_cuda: 1 CUDA source compiles as released" in proc.stdout
    staged = tmp / "staged"
    write_submissions(ROOT / "examples", root / "release", staged, "grayscale")
    write_submissions(ROOT / "tests" / "tamper", root / "release", staged, "grayscale")
    course("collect", "grayscale", str(lms_zip(tmp / "class.zip", staged, CLASS)), cwd=root)
    # zed's first notebook reached submitted/ broken (not by collect, which refuses it): it must not stop the class
    shutil.copytree(root / "submitted" / "carol", root / "submitted" / "zed")
    (root / "submitted" / "zed" / "grayscale" / f"{L0}.ipynb").write_text("{ truncated")
    nbgrader_copy = tmp / "nbgrader-course"
    shutil.copytree(root, nbgrader_copy)

    scratch = tmp / "tmp"  # the temporary folders of the stopped run, its killed workers' included
    scratch.mkdir()
    env = command_env({seeds.SECRET_ENV: SECRET, "TMPDIR": str(scratch)})
    # as a background job of a script starts it (SIGINT ignored): the stop below must work all the same
    first = subprocess.Popen([sys.executable, "-m", "course", "grade", "grayscale", "--workers", "2"], cwd=root,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 3000
    while not [e for e in ledger(root) if e["status"] == "graded"] and first.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(2)
    first.send_signal(signal.SIGINT)  # the instructor stops it halfway
    first_out, first_err = first.communicate(timeout=300)
    done_before = {e["student"] for e in ledger(root) if e["status"] == "graded"}
    left_behind = sorted(p.name for p in scratch.iterdir())
    summary = tmp / "summary.json"
    resumed = course("grade", "grayscale", "--workers", "2", "--json", str(summary), cwd=root, check=False)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # zed failed
    return {"root": root, "summary": json.loads(summary.read_text()), "done_before": done_before,
            "nbgrader": nbgrader_copy, "output": resumed.stdout + resumed.stderr, "left_behind": left_behind,
            "first": f"exit {first.returncode}\n{first_out[-3000:]}\n{first_err[-3000:]}"}


def table(root):
    return grades(f"sqlite:///{root / 'gradebook.db'}", "grayscale", root / "release")


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("student", CLASS)
def test_each_student_gets_the_marks_their_answers_deserve(graded, student):
    got = {key for key, row in table(graded["root"]).items() if row[student][0] == row[student][1]}
    assert got == EXPECTED_PASSES[student]


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_a_stop_halfway_keeps_the_finished_students(graded):
    before, summary = graded["done_before"], graded["summary"]
    assert before, "the stopped run graded nobody before its stop: " + graded["first"]  # its output says why
    assert set(before) <= set(summary["unchanged_students"])
    assert not set(before) & set(summary["graded"])
    assert set(summary["graded"]) | set(before) | set(summary["failed"]) == set(CLASS) | {"zed"}
    assert graded["left_behind"] == []  # the stopped workers' scratch too: a class stopped often must not fill /tmp


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_a_broken_submission_is_recorded_with_its_reason_and_the_class_is_graded(graded):
    assert list(graded["summary"]["failed"]) == ["zed"]
    assert "not a Jupyter notebook" in graded["summary"]["failed"]["zed"]
    assert all("zed" not in row for row in table(graded["root"]).values())
    stopped = graded["summary"]["kernel_stopped"]
    assert list(stopped) == ["dave"] and list(stopped["dave"]) == [L0] and "kernel stopped" in stopped["dave"][L0]


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_one_trusted_pass_judged_every_notebook_and_recorded_how(graded):
    summary = graded["summary"]
    assert summary["disagreements"] == [] and not summary["verify"]  # no second pass: the first one is trusted
    assert summary["judged"] == {"trusted": len(NOTEBOOKS) * len(summary["graded"])}
    assert "(every test cell by nbgrader's own process)" in graded["output"]
    for entry in ledger(graded["root"]):
        if entry["status"] == "graded":
            assert set(entry["judged"]) == set(NOTEBOOKS)
            assert all(how.startswith("trusted: ") for how in entry["judged"].values())


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_each_student_gets_hidden_cases_of_their_own(graded):
    def seed(student):
        nb = nbformat.read(graded["root"] / "autograded" / student / "grayscale" / f"{L0}.ipynb", as_version=4)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "rgb2grey_py_hidden_sizes")
        return int(re.search(r"seed=(\d+)", cell.source).group(1))
    source = nbformat.read(graded["root"] / "source" / "grayscale" / f"{L0}.ipynb", as_version=4)
    written = int(re.search(r"seed=(\d+)", next(c.source for c in source.cells if "seed=" in c.source)).group(1))
    assert seed("alice") == seeds.personal_seed(written, "alice", SECRET.encode())
    assert len({seed(s) for s in CLASS} | {written}) == len(CLASS) + 1


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_the_same_grades_and_messages_as_nbgrader_autograde(graded):
    other = graded["nbgrader"]
    env_secret = os.environ.get(seeds.SECRET_ENV)
    os.environ[seeds.SECRET_ENV] = SECRET
    try:
        proc = nbgrader("autograde", "grayscale", "--create", "--force", "--student", "bob", cwd=other)
    finally:
        if env_secret is None:
            os.environ.pop(seeds.SECRET_ENV)
        else:
            os.environ[seeds.SECRET_ENV] = env_secret
    assert proc.returncode == 0, proc.stderr
    ours, theirs = table(graded["root"]), table(other)
    assert {k: v["bob"] for k, v in ours.items()} == {k: v["bob"] for k, v in theirs.items()}

    def messages(root):
        out = {}
        for name in NOTEBOOKS:
            nb = nbformat.read(root / "autograded" / "bob" / "grayscale" / f"{name}.ipynb", as_version=4)
            for c in nb.cells:
                if seeds.is_test_cell(c):
                    out[c.metadata["nbgrader"]["grade_id"]] = (c.source, [o.get("evalue", o.get("text", ""))
                                                                         for o in c.outputs])
        return out
    assert messages(graded["root"]) == messages(other)


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_feedback_names_each_verdict_and_hides_hidden_tests(graded):
    root = graded["root"]
    course("feedback", "grayscale", cwd=root)
    html = (root / "feedback" / "bob" / "grayscale" / f"{L3}.html").read_text()
    assert "impossible grid" in html and "never written" in html
    assert "seed=" not in html and "BEGIN HIDDEN" not in html and "course/harness" not in html
    assert "course/topics" not in html and "the hidden tests run here" in html
    assert "rgb2grey_py: random passed" in (root / "feedback" / "alice" / "grayscale" / f"{L0}.html").read_text()


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_export_writes_grades_and_which_exercise_the_class_failed(graded):
    root = graded["root"]
    proc = course("export", "grayscale", cwd=root)
    rows = {r["student"]: r for r in csv.DictReader(open(root / "exports" / "grayscale-grades.csv"))}
    # the speed test's 2 points: measured on a GPU only (alice's kernel is the lesson's own: full marks there)
    assert rows["alice"]["total"] == ("33" if cpu_mode() else "35") and rows["alice"]["max"] == "35"
    assert rows["carol"]["total"] == "0" and rows["zed"]["status"] == "failed"
    assert "not a Jupyter notebook" in rows["zed"]["note"] and "kernel stopped" in rows["dave"]["note"]
    tests = {r["test"]: r for r in csv.DictReader(open(root / "exports" / "grayscale-exercises.csv"))}
    # alice and dave: mallory's redefined check does not count (the test cells are judged outside her kernel)
    assert tests["rgb2grey_py_photo"]["passed"] == "2" and tests["rgb2grey_py_photo"]["graded"] == "5"
    # carol, dave and mallory left the released stub: one message for all three; bob's own mistake is another
    assert tests["rgb_to_grayscale_cuda_tiny"]["passed"] == "1" and tests["rgb_to_grayscale_cuda_tiny"]["students_with_it"] == "3"
    assert (root / "exports" / "grayscale-pass-rates.png").stat().st_size > 1000
    assert "rgb2grey_py_photo" in proc.stdout
    speed = list(csv.DictReader(open(root / "exports" / "grayscale-speed.csv")))  # the leaderboard: who was timed
    assert [r["student"] for r in speed] == ([] if cpu_mode() else ["alice"])


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_course_verify_reruns_a_student_with_their_own_hidden_cases_and_agrees(graded):
    proc = course("verify", "grayscale", "--student", "bob", cwd=graded["root"])
    found = re.search(r"(\d+) tests re-run in clean processes; 0 disagree", proc.stdout)
    assert found and int(found.group(1)) == sum(1 for row in table(graded["root"]).values() if "bob" in row), proc.stdout


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_grading_again_grades_only_an_edited_submission(graded, tmp_path):
    root = shutil.copytree(graded["root"], tmp_path / "course", symlinks=True)
    again = course("grade", "grayscale", "--json", str(tmp_path / "a.json"), cwd=root, check=False)
    assert json.loads((tmp_path / "a.json").read_text())["graded"] == [], again.stderr
    nb = root / "submitted" / "bob" / "grayscale" / f"{L0}.ipynb"
    from course.grading.commands.examples import fill
    right = (ROOT / "examples" / "grayscale" / "alice" / "rgb2grey_py.py").read_text()
    nbformat.write(fill(nbformat.read(nb, as_version=4), {"rgb2grey_py": right}), nb)
    course("grade", "grayscale", "--json", str(tmp_path / "b.json"), cwd=root, check=False)
    assert json.loads((tmp_path / "b.json").read_text())["graded"] == ["bob"]
    assert table(root)[(L0, "rgb2grey_py_photo")]["bob"][0] == 2


@pytest.mark.xdist_group("cli-grayscale")
@pytest.mark.timeout(3600)
def test_two_shards_merge_into_the_same_gradebook(graded, tmp_path):
    root = shutil.copytree(graded["root"], tmp_path / "course", symlinks=True)
    cheapest_first = ("carol", "mallory", "alice", "bob")  # an empty stub grades fastest
    one = next(s for s in cheapest_first if in_shard(s, (1, 2)))
    two = next(s for s in cheapest_first if in_shard(s, (2, 2)))
    for s in (one, two):
        remove_student(f"sqlite:///{root / 'gradebook.db'}", "grayscale", s)
    shutil.rmtree(root / "autograded" / ".course")
    env = command_env({seeds.SECRET_ENV: SECRET})
    shards = [subprocess.Popen([sys.executable, "-m", "course", "grade", "grayscale", "--shard", shard,
                                "--workers", "1", "--student", one, "--student", two], cwd=root, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for shard in ("1/2", "2/2")]
    for p in shards:
        out, err = p.communicate(timeout=3000)
        assert p.returncode == 0, out + err
    course("merge", "grayscale", cwd=root)
    ours, reference = table(root), table(graded["root"])
    for s in (one, two):
        assert {k: v[s] for k, v in ours.items()} == {k: v[s] for k, v in reference.items()}
    assert {one, two} <= {e["student"] for e in ledger(root)}


def test_grade_refuses_a_course_without_a_release(tmp_path):
    root = course_folder(tmp_path, released=False)
    (root / "submitted" / "alice" / "grayscale").mkdir(parents=True)
    proc = course("grade", "grayscale", cwd=root, check=False)
    assert proc.returncode == 2 and "release" in proc.stderr
    with pytest.raises(CourseError):
        from course.grading.commands.grade import parse_shard
        parse_shard("x")

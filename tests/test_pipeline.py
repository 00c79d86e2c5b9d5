"""The instructor's pipeline end to end: release, the example submissions, autograde, the grade table.

The CUDA tests run on the GPU where there is one, and in CPU mode elsewhere: the verdicts are the same.
The tests judge the outcome (the gradebook, each autograded notebook, the course's own records), never
the lines that nbgrader, Jupyter or a kernel happen to log.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course.assignments import Assignment, declared
from course.device import cpu_mode
from course.grading.commands.check import example_results
from course.grading.run.gradebook import grade_table, grades
from course.grading.nbgrader.autograde import SafeExecute  # noqa: F401 (the execute step under test, configured in nbgrader_config)
from course.grading.commands.examples import fill, write_submissions
from course.grading.cell_roles import is_demo
from course.grading.nbgrader.trusted import DEMO_NOTE
from course.grading.run.verify import disagreements, verify
from course.grading.warm import WarmKernels, nbgrader_args
from tests.support import ROOT, nbgrader

L0, L1, L2, L3, L4 = "01_L0_loop", "02_L1_run_kernel", "03_L2_blk_kernel", "04_L3_cuda", "05_triton"
PY_TESTS = ("tiny", "ragged_sizes", "tall_and_wide", "photo", "hidden_sizes")
CUDA_TESTS = ("tiny", "ragged_sizes", "tall_and_wide", "photo", "large", "hidden_sizes", "memory", "integrity")
# The speed test (harness/speed.py) awards nothing in CPU mode; on a GPU it times only a kernel that passed every
# check above, so of the example students only alice's (the lesson's own kernel) is timed, and gets full marks.
SPEED = () if cpu_mode() else ("speed",)
TRITON_TESTS = ("tiny", "ragged_sizes", "tall_and_wide", "photo", "hidden_sizes", "memory", "integrity")
PREFIX = {L0: "rgb2grey_py", L1: "rgb2grey_pyk", L2: "rgb2grey_pybk", L3: "rgb_to_grayscale_cuda", L4: "rgb2grey_triton"}


def passed(nb, *tests):
    return {(nb, f"{PREFIX[nb]}_{t}") for t in tests}


# What each example student's mistakes cost them (examples/grayscale/README.md and tests/tamper/grayscale/README.md
# explain each one). The CUDA tests run on a GPU, or on a CPU in CPU mode.
EXPECTED_PASSES = {
    "alice": (passed(L0, *PY_TESTS) | passed(L1, *PY_TESTS) | passed(L2, *PY_TESTS) | passed(L3, *CUDA_TESTS, *SPEED)
              | passed(L4, *TRITON_TESTS)),
    # 0.299 for red tips the 1x1 case's single pixel the right way only; the missing guard
    # leaves only the photo, whose 19,200 pixels fill 75 blocks exactly; n / threads blocks
    # cover all pixels of the photo (1,200 blocks) and none of the other cases (memory and
    # integrity award only an answer that is right on the ragged sizes); the Triton store without its mask
    # writes past the output, which only the memory check sees.
    "bob": (passed(L0, "tiny") | passed(L1, *PY_TESTS) | passed(L2, "photo") | passed(L3, "photo")
            | passed(L4, *(t for t in TRITON_TESTS if t != "memory"))),
    "carol": set(),
    "dave": passed(L0, "tiny", "ragged_sizes", "tall_and_wide", "photo") | passed(L1, *PY_TESTS),
    "erin": passed(L0, *PY_TESTS),
    # tests/tamper/grayscale/README.md: each attacks the grading in the notebook; L0's weights 0.3/0.6/0.1 deserve
    # nothing, and that is what each gets (the test cells are judged outside the notebook's kernel)
    "mallory": set(), "oscar": set(), "ivan": set(), "peggy": set(), "rex": set(),
    # L3's widened allow-list reaches no verdict
    "trent": passed(L3, *(t for t in CUDA_TESTS if t != "integrity")),
    # a child's report that runs code when read is refused (harness/wire.py): kernels that write nothing earn nothing
    "sybil": set(), "trudy": set(),
    # a profiler that reports a kernel of its own: the wrapper's object calls PyTorch's operations
    "victor": passed(L3, *(t for t in CUDA_TESTS if t != "integrity")),
    # kernels that break the one-thread rule (harness/contract.py): a 1x1 image's one pixel is thread 0's own
    "chuck": passed(L1, "tiny"), "heidi": set(), "niaj": passed(L2, "tiny"),
}
ONE_THREAD = {"chuck": (L1, "ran a vectorised PyTorch operation"), "heidi": (L1, "called the course's rgb2grey()"),
              "niaj": (L2, "wrote 259 pixels")}  # tests/tamper/grayscale/README.md
# processes that run student code are sandboxed (course/sandbox.py): eve's kernel reaches for the grader's files and
# the network with a right L0; frank's C++ host code does too, and leaves a daemon, with a right kernel; grace's forks
# a bomb around a kernel with L0's wrong weights. On a GPU frank loses the memory check, and so the speed test (it
# times only a kernel that passed every check): compute-sanitizer follows every process its child starts, and the
# daemon his C++ forks there breaks his kernel's next launch ("unspecified launch failure" on cudaFree, H100 host);
# CUDA does not support fork in a process that uses it
SANDBOXED = {"eve": passed(L0, *PY_TESTS), "grace": set(),
             "frank": passed(L3, *CUDA_TESTS, *SPEED) if cpu_mode() else passed(L3, *(t for t in CUDA_TESTS
                                                                                   if t != "memory"))}
EXPECTED_PASSES.update(SANDBOXED)
TAMPERED = ("mallory", "trent", "oscar", "ivan", "peggy", "rex", "sybil", "trudy", "victor")
MARKERS = ("rex-was-here", "sybil-was-here", "trudy-was-here")  # what an attack's code touches if it ever runs
STUDENTS = sorted(EXPECTED_PASSES)
PROVOKED = {("dave", L0)}  # the kernels that die on purpose (tests/tamper/grayscale/README.md)
REPORT = Path(os.environ["COURSE_REPORT_DIR"]) if os.environ.get("COURSE_REPORT_DIR") else None
pytestmark = [pytest.mark.xdist_group("pipeline-grayscale"), pytest.mark.timeout(2400)]


DEMO_OUTPUT = {"output_type": "stream", "name": "stdout", "text": DEMO_NOTE}


def autograde_outcome(course, assignment, students, provoked):
    """What went wrong in an autograde run, judged by its results: a missing or cut notebook, a kernel stopped unprovoked."""
    problems = []
    released = {p.stem: nbformat.read(p, as_version=4) for p in sorted((course / "release" / assignment).glob("*.ipynb"))}
    for student in students:
        for name, rel in released.items():
            path = course / "autograded" / student / assignment / f"{name}.ipynb"
            if not path.exists():
                problems.append(f"{student}/{name}: not autograded")
                continue
            nb = nbformat.read(path, as_version=4)
            if len(nb.cells) != len(rel.cells):
                problems.append(f"{student}/{name}: {len(nb.cells)} cells, the release has {len(rel.cells)}")
            stopped = nb.metadata.get("course", {}).get("kernel_stopped")
            if bool(stopped) != ((student, name) in provoked):
                problems.append(f"{student}/{name}: kernel stopped: {stopped}")
            if not stopped:
                unrun = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.execution_count is None
                         and not is_demo(c)]
                if unrun:
                    problems.append(f"{student}/{name}: cells {unrun} did not run")
                ran = [i for i, c in enumerate(nb.cells) if is_demo(c) and c.outputs != [DEMO_OUTPUT]]
                if ran:  # grading skips a demo cell and says so
                    problems.append(f"{student}/{name}: demo cells {ran} have outputs other than the note")
    return problems


def autograded_course(tmp_path_factory, assignment, expected_students, provoked, course_grade=False):
    """A course folder with the assignment released, the example and tamper submissions written and autograded: by
    `course grade` (course_grade: its workers, compiling ahead, sandboxes and ledger), else by nbgrader autograde."""
    course = tmp_path_factory.mktemp(assignment)
    for name in ("source", "examples"):
        shutil.copytree(ROOT / name, course / name)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    proc = nbgrader("generate_assignment", assignment, "--force", cwd=course)
    assert proc.returncode == 0, proc.stderr
    students = write_submissions(course / "examples", course / "release", course / "submitted", assignment)
    if (ROOT / "tests" / "tamper" / assignment).is_dir():
        students += write_submissions(ROOT / "tests" / "tamper", course / "release", course / "submitted", assignment)
    assert sorted(students) == sorted(expected_students)
    if course_grade:  # every student graded and recorded, or the command exits 1 naming who was not
        proc = subprocess.run([sys.executable, "-m", "course", "grade", assignment], cwd=course,
                              capture_output=True, text=True)
        logs = "".join(p.read_text(errors="replace")
                       for p in (course / "autograded" / ".course" / assignment / "logs").glob("*.log"))
        assert proc.returncode == 0, proc.stderr[-5000:] + logs[-5000:]
    else:
        # kernels forked from a warm process, as `course grade` starts them (torch imported once, not per notebook);
        # test_cli compares a student's grades and messages with those of kernels started cold
        kernels = WarmKernels()
        try:
            assert kernels.wait_ready()
            proc = nbgrader("autograde", assignment, "--create", "--force", *nbgrader_args(), cwd=course,
                            env=kernels.env())
        finally:
            kernels.close()
        assert proc.returncode == 0, proc.stderr
        logs = proc.stderr
    problems = autograde_outcome(course, assignment, students, provoked)
    assert not problems, "\n".join(problems) + "\n" + logs[-5000:]
    assert "has changed" not in logs, "a released hidden-test cell must not read as edited"
    if REPORT:
        REPORT.mkdir(parents=True, exist_ok=True)
        table = grade_table(f"sqlite:///{course / 'gradebook.db'}", assignment, course / "release")
        (REPORT / f"grades-{assignment}.txt").write_text(table + "\n")
    return course


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def graded(tmp_path_factory):
    # the class with the attacks on the grading (tests/tamper/grayscale/) is graded as an instructor grades it
    return autograded_course(tmp_path_factory, "grayscale", STUDENTS, PROVOKED, course_grade=True)


def outputs(course, student, notebook, grade_id):
    nb = nbformat.read(course / "autograded" / student / "grayscale" / f"{notebook}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(o.get("evalue", "") + o.get("text", "") for o in cell.outputs)


@pytest.mark.parametrize("student", STUDENTS)
def test_each_student_gets_the_marks_their_answers_deserve(graded, student):
    table = grades(f"sqlite:///{graded / 'gradebook.db'}", "grayscale", graded / "release")
    assert len(table) == 3 * len(PY_TESTS) + len(CUDA_TESTS) + 1 + len(TRITON_TESTS)  # 1: the speed test
    got = {key for key, row in table.items() if row[student][0] == row[student][1]}
    partial = {key for key, row in table.items() if 0 < row[student][0] < row[student][1]}
    assert not partial
    assert got == EXPECTED_PASSES[student]


def test_the_released_stub_compiles_and_its_tests_fail(graded):
    # carol submitted the release as it is: the compile cell ran and left no error.
    nb = nbformat.read(graded / "autograded" / "carol" / "grayscale" / f"{L3}.ipynb", as_version=4)
    compile_cell = next(c for c in nb.cells if "load_cuda(cuda_src" in c.source)
    assert not [o for o in compile_cell.outputs if o.output_type == "error"]
    assert "never written" in outputs(graded, "carol", L3, "rgb_to_grayscale_cuda_photo")
    assert "no kernel of its own" in outputs(graded, "carol", L3, "rgb_to_grayscale_cuda_integrity")


def test_bobs_messages_name_his_mistakes(graded):
    assert "IndexError" in outputs(graded, "bob", L2, "rgb2grey_pybk_tiny")
    assert "check the weights" in outputs(graded, "bob", L0, "rgb2grey_py_photo")
    assert "never written" in outputs(graded, "bob", L3, "rgb_to_grayscale_cuda_ragged_sizes")
    assert "impossible grid" in outputs(graded, "bob", L3, "rgb_to_grayscale_cuda_tiny")
    memory = outputs(graded, "bob", L4, "rgb2grey_triton_memory")
    assert "outside a tensor" in memory and "mask=mask" in memory and "threadIdx" not in memory


def test_a_dead_kernel_keeps_the_points_before_it_and_grades_the_other_notebooks(graded):
    message = outputs(graded, "dave", L0, "rgb2grey_py_hidden_sizes")
    assert "kernel stopped" in message and "DeadKernelError" in message
    assert (graded / "autograded" / "dave" / "grayscale" / f"{L1}.ipynb").exists()


def test_writing_to_stderr_does_not_zero_a_right_answer(graded):
    assert outputs(graded, "erin", L0, "rgb2grey_py_photo").strip() == "rgb2grey_py: photo passed"


def test_every_test_cell_was_judged_outside_the_kernel(graded):
    for student in STUDENTS:
        for path in (graded / "autograded" / student / "grayscale").glob("*.ipynb"):
            judged = nbformat.read(path, as_version=4).metadata["course"]["judged"]
            assert judged.startswith("trusted: ") and not judged.startswith("trusted: 0 "), (student, path.name)


def test_no_attack_on_the_grading_changes_the_gradebook_the_feedback_or_the_export(graded, tmp_path):
    course = shutil.copytree(graded, tmp_path / "course")
    proc = nbgrader("generate_feedback", "grayscale", "--force", cwd=course)
    assert proc.returncode == 0, proc.stderr
    import csv
    import subprocess
    import sys
    subprocess.run([sys.executable, "-m", "course", "export", "grayscale"], cwd=course, check=True, capture_output=True)
    rows = {r["student"]: r for r in csv.DictReader(open(course / "exports" / "grayscale-grades.csv"))}
    table = grades(f"sqlite:///{course / 'gradebook.db'}", "grayscale", course / "release")
    for student in TAMPERED:
        deserved = sum(row[student][1] for key, row in table.items() if key in EXPECTED_PASSES[student])
        assert float(rows[student]["total"]) == deserved, student
        assert float(rows[student][L0]) == 0, student
        html = (course / "feedback" / student / "grayscale" / f"{L0}.html").read_text()
        assert "pixels are wrong" in html, student
        assert "looks fine" not in outputs(course, student, L0, "rgb2grey_py_photo"), student
    for marker in MARKERS:
        assert not list(course.rglob(marker)) and not list(graded.rglob(marker)), marker


def test_the_audit_of_a_trusted_gradebook_finds_nothing_to_correct(graded):
    rows = verify("grayscale", graded, students=["mallory", "trent", "peggy", "alice"], notebooks=[L0], workers=2)
    assert rows and not disagreements(rows)


def test_a_report_that_runs_code_when_read_and_a_forged_profiler_reach_no_verdict(graded):
    for student, notebook, grade_id in (("sybil", L3, "rgb_to_grayscale_cuda_photo"),
                                        ("trudy", L4, "rgb2grey_triton_integrity")):
        assert "could not read your function's results" in outputs(graded, student, notebook, grade_id), student
    assert "PyTorch operation" in outputs(graded, "victor", L3, "rgb_to_grayscale_cuda_integrity")


def test_a_kernel_that_breaks_the_one_thread_rule_loses_those_points_naming_the_rule(graded, tmp_path):
    course = shutil.copytree(graded, tmp_path / "course")
    for student in ONE_THREAD:
        proc = nbgrader("generate_feedback", "grayscale", "--force", "--student", student, cwd=course)
        assert proc.returncode == 0, proc.stderr
    import csv
    import subprocess
    import sys
    subprocess.run([sys.executable, "-m", "course", "export", "grayscale"], cwd=course, check=True, capture_output=True)
    rows = {r["student"]: r for r in csv.DictReader(open(course / "exports" / "grayscale-grades.csv"))}
    table = grades(f"sqlite:///{course / 'gradebook.db'}", "grayscale", course / "release")
    for student, (notebook, phrase) in ONE_THREAD.items():
        deserved = sum(row[student][1] for key, row in table.items() if key in EXPECTED_PASSES[student])
        assert float(rows[student]["total"]) == deserved, student
        which = "ragged_sizes" if student == "niaj" else "photo"
        message = outputs(course, student, notebook, f"{PREFIX[notebook]}_{which}")
        assert phrase in message and "a kernel computes only its own pixel" in message, (student, message)
        hidden = outputs(course, student, notebook, f"{PREFIX[notebook]}_hidden_sizes")
        assert "a kernel computes only its own pixel" in hidden, (student, hidden)
        html = (course / "feedback" / student / "grayscale" / f"{notebook}.html").read_text()
        assert "a kernel computes only its own pixel" in html, student


def test_attacks_from_student_processes_change_nothing_outside_their_sandbox(graded):
    from course.toolchain import build_root
    tried = outputs(graded, "eve", L0, "rgb2grey_py")
    for what in ("hidden seeds", "gradebook", "socket"):
        assert f"'{what}': 'PermissionError'" in tried, tried
    assert "'secret': 'PermissionError'" in tried or "'secret': 'FileNotFoundError'" in tried, tried
    assert "got " not in tried
    for marker in ("frank-was-here", "frank-read-the-secret", "frank-read-the-seeds", "frank-could-write-a-module",
                   "frank-opened-a-socket", "frank-connected"):
        assert not list(graded.rglob(marker)) and not (build_root() / marker).exists(), marker
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _named(pid, ("frank-daemon", "grace-bomb"))]
    assert not left, ("a process a check started is still running after it (its user, parent and state): " +
                      "; ".join(_who(pid) for pid in left[:5]))


def _who(pid):
    from course.sandbox import process_status
    fields = process_status(pid)
    if fields is None:
        return f"{pid}: gone"
    return f"{pid} {fields['Name'].strip()} uid {fields['Uid'].split()[0]} ppid {fields['PPid'].strip()} " \
           f"{fields['State'].strip()}"


def _named(pid, names):
    from course.sandbox import process_status
    fields = process_status(pid)
    return fields is not None and fields.get("Name", "").strip() in names and \
        not fields.get("State", "").strip().startswith("Z")


def test_a_widened_allow_list_changes_no_verdict_in_the_notebook_or_in_verify(graded):
    assert "PyTorch operation" in outputs(graded, "trent", L3, "rgb_to_grayscale_cuda_integrity")
    rows = verify("grayscale", graded, students=["trent"], notebooks=[L3], workers=1)
    assert not disagreements(rows)
    # on a GPU the speed test times only a kernel that passed every check: trent's gets none of its points either
    assert [r[2] for r in rows if not r[4]] == ["rgb_to_grayscale_cuda_integrity"] + \
        [f"rgb_to_grayscale_cuda_{s}" for s in SPEED]


def test_an_old_grade_never_stands_in_for_a_new_one(graded):
    # erin resubmits a notebook whose kernel dies on the hidden sizes: her L0 grade must drop.
    nb = graded / "submitted" / "erin" / "grayscale" / f"{L0}.ipynb"
    answers = {"rgb2grey_py": (ROOT / "tests" / "tamper" / "grayscale" / "dave" / "rgb2grey_py.py").read_text()}
    nbformat.write(fill(nbformat.read(nb, as_version=4), answers), nb)
    proc = nbgrader("autograde", "grayscale", "--force", "--student", "erin", "--notebook", L0, cwd=graded)
    assert proc.returncode == 0, proc.stderr
    table = grades(f"sqlite:///{graded / 'gradebook.db'}", "grayscale", graded / "release")
    assert table[(L0, "rgb2grey_py_hidden_sizes")]["erin"][0] == 0
    assert table[(L0, "rgb2grey_py_photo")]["erin"][0] == 2


def test_feedback_shows_the_messages_a_student_reads(graded):
    proc = nbgrader("generate_feedback", "grayscale", "--force", cwd=graded)
    assert proc.returncode == 0, proc.stderr
    if REPORT:
        shutil.copytree(graded / "feedback", REPORT / "feedback", dirs_exist_ok=True)
    html = (graded / "feedback" / "bob" / "grayscale" / f"{L3}.html").read_text()
    assert "never written" in html and "impossible grid" in html and "Hint:" in html


def test_grade_table_lists_every_exercise_and_a_total(graded):
    text = grade_table(f"sqlite:///{graded / 'gradebook.db'}", "grayscale", graded / "release")
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["exercise", "alice", "bob", "carol"]
    assert lines[1].startswith(f"{L0}/rgb2grey_py_tiny")
    assert lines[-1].split()[0] == "total"
    assert lines[-1].split()[3] == "0/35"  # 33 points of checks, 2 of speed


def test_an_edited_test_cell_is_reported_and_restored(graded, tmp_path):
    course = shutil.copytree(graded, tmp_path / "course")
    folder = course / "submitted" / "walter" / "grayscale"
    folder.mkdir(parents=True)
    nb = nbformat.read(course / "submitted" / "alice" / "grayscale" / f"{L0}.ipynb", as_version=4)
    tiny = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "rgb2grey_py_tiny")
    tiny.source = "pass  # the test, deleted"
    nbformat.write(nb, folder / f"{L0}.ipynb")
    proc = nbgrader("autograde", "grayscale", "--create", "--student", "walter", "--notebook", L0, cwd=course)
    assert proc.returncode == 0, proc.stderr
    changed = [line for line in proc.stderr.splitlines() if "has changed" in line]
    assert len(changed) == 1 and "rgb2grey_py_tiny" in changed[0], proc.stderr
    assert "rgb2grey_py: tiny passed" in outputs(course, "walter", L0, "rgb2grey_py_tiny")


# ---- matmul: the example students (examples/matmul/README.md explains each mistake)
M0, M1, M2, M3, M5, M6 = "01_L0_loop", "02_L1_run_kernel", "03_L2_blk_kernel", "04_L3_cuda", "05_tiling", "06_triton"
M_PY = ("tiny", "ragged_sizes", "tall_and_skinny", "all_different", "digits", "hidden_sizes")
M_CUDA = ("tiny", "ragged_sizes", "tall_and_skinny", "all_different", "digits", "large", "hidden_sizes", "memory",
          "integrity")
M_PREFIX = {M0: "matmul", M1: "matmul_pyk", M2: "matmul_2d", M3: "matmul_cuda", M6: "matmul_triton"}


def m_passed(nb, *tests, prefix=None):
    return {(nb, f"{prefix or M_PREFIX[nb]}_{t}") for t in tests}


def tiled(py=(), cuda=()):
    return m_passed(M5, *py, prefix="matmul_tiled_py") | m_passed(M5, *cuda, prefix="matmul_tiled_cuda")


MATMUL_PASSES = {
    "alice": (m_passed(M0, *M_PY) | m_passed(M1, *M_PY) | m_passed(M2, *M_PY) | m_passed(M3, *M_CUDA)
              | tiled(M_PY, M_CUDA + ("race",) + SPEED) | m_passed(M6, *M_CUDA, *SPEED)),
    # L0 drops the last product (the digits' last pixel is blank); L2's guard swaps h and w (IndexError past 1x1);
    # L3 swaps the grid's x and y (right where h and w need as many blocks); the tiled Python kernel lacks its
    # second barrier (wrong wherever k needs two tiles); the tiled CUDA one drops the last partial tile, and so does his
    # Triton k loop (range(k // BK) tiles of 32: the digits' dropped pixels 768-783 are blank; 1024 and CPU mode's 128
    # are whole tiles).
    "bob": (m_passed(M0, "digits") | m_passed(M1, *M_PY) | m_passed(M2, "tiny") | m_passed(M3, "tiny", "digits", "large")
            | tiled(("tiny", "tall_and_skinny", "all_different"), ("digits", "large")) | m_passed(M6, "digits", "large")),
    "carol": set(),
}


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def graded_matmul(tmp_path_factory):
    return autograded_course(tmp_path_factory, "matmul", sorted(MATMUL_PASSES), set())


@pytest.mark.xdist_group("pipeline-matmul")
@pytest.mark.parametrize("student", sorted(MATMUL_PASSES))
def test_each_matmul_student_gets_the_marks_their_answers_deserve(graded_matmul, student):
    table = grades(f"sqlite:///{graded_matmul / 'gradebook.db'}", "matmul", graded_matmul / "release")
    got = {key for key, row in table.items() if row[student][0] == row[student][1]}
    assert not {key for key, row in table.items() if 0 < row[student][0] < row[student][1]}
    assert got == MATMUL_PASSES[student]


@pytest.mark.xdist_group("pipeline-matmul")
def test_the_released_matmul_stubs_compile_and_reverification_agrees(graded_matmul):
    for nb in (M3, M5):
        cells = nbformat.read(graded_matmul / "autograded" / "carol" / "matmul" / f"{nb}.ipynb", as_version=4).cells
        compile_cell = next(c for c in cells if "load_cuda(" in c.source)  # the exercise's cell: the stub compiles there
        assert not [o for o in compile_cell.outputs if o.output_type == "error"], nb
    # bob: some tests passed and some failed in each notebook, so agreement means something both ways
    rows = verify("matmul", graded_matmul, students=["bob"], notebooks=[M0, M3, M5], workers=2)
    assert {r[4] for r in rows} == {True, False}
    assert rows and not disagreements(rows)


# ---- drills: the example students (examples/drills/README.md explains each mistake)
DRILL_RELEASE = {p.stem: nbformat.read(p, as_version=4) for p in sorted((ROOT / "release" / "drills").glob("*.ipynb"))}
# the written answers: markdown cells that nbgrader grades by hand
WRITTEN = {c.metadata["nbgrader"]["grade_id"] for nb in DRILL_RELEASE.values() for c in nb.cells
           if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")}
BOBS_FAILURES = (
    {f"drill1_exact_cuda_{t}" for t in ("edges", "large", "hidden_sizes")}  # __fmaf_rn: the fused bytes
    | {f"drill2_rows_{rung}_max_{t}" for rung in ("py", "pyk", "pybk") for t in ("shapes", "negative")}  # max from 0
    | {f"drill2_row_max_cuda_{t}" for t in ("ragged_sizes", "negative", "hidden_sizes", "memory", "integrity")}
    | {"drill3_no_guard_ragged",  # kept the guard
       "drill4_timer_waits",  # no synchronize()
       "drill5_matmul_cuda_ragged_sizes", "drill5_matmul_cuda_memory",  # the grid's x and y swapped
       "drill7_printf_cuda_photo",  # i <= 5
       "drill8_l0_examples"}  # one example
    | {f"drill9_smooth_cuda_{t}" for t in ("small", "ragged", "memory")}  # Python's guard 0 < i < n - 1 copied into C
    # nothing waits after the launch: on a GPU the error never shows; CPU mode raises at the launch itself
    | (set() if cpu_mode() else {"drill6_script_blocking"}))


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def graded_drills(tmp_path_factory):
    return autograded_course(tmp_path_factory, "drills", ["alice", "bob", "carol"], set())


@pytest.mark.xdist_group("pipeline-drills")
def test_each_drills_student_gets_the_marks_their_answers_deserve(graded_drills):
    table = grades(f"sqlite:///{graded_drills / 'gradebook.db'}", "drills", graded_drills / "release")
    assert len(DRILL_RELEASE) == 9 and {nb for nb, _ in table} == set(DRILL_RELEASE)
    assert len(WRITTEN) == 7  # drills 1, 3, 4, 5, 6, 8's plan and 9
    auto = {key for key in table if key[1] not in WRITTEN}
    assert not {key for key in table if key[1] in WRITTEN and any(row[0] for row in table[key].values())}, \
        "written answers wait for manual grading"
    full = {s: {key[1] for key in auto if table[key][s][0] == table[key][s][1]} for s in ("alice", "bob", "carol")}
    ids = {key[1] for key in auto}
    assert full["alice"] == ids
    assert ids - full["bob"] == BOBS_FAILURES
    assert full["carol"] == set()
    score = {s: sum(table[key][s][0] for key in auto) for s in full}
    assert score == {"alice": 77, "bob": 49 if cpu_mode() else 46, "carol": 0}  # examples/drills/README.md


@pytest.mark.xdist_group("pipeline-drills")
def test_course_check_finds_the_losses_grading_finds_without_nbgrader():
    assignment = Assignment("drills", ROOT)
    exercises = assignment.exercises()
    lost = {}
    for student in ("alice", "bob", "carol"):
        results = example_results(assignment, student, progress=lambda line: None)
        lost[student] = {exercises[e].prefix + t for (e, t), v in results.items() if not v["passed"]}
    assert lost["alice"] == set() and lost["bob"] == BOBS_FAILURES
    assert lost["carol"] == {e.prefix + t for e in exercises.values() for t in e.tests if t != "speed"}


# ---- every other assignment (`course new`'s among them): each example student loses exactly the tests that
# examples/<assignment>/expected.json lists. The assignments above have blocks of their own, which say more.
OWN_BLOCKS = ("grayscale", "matmul", "drills")
OTHERS = [a for a in declared(ROOT) if a.name not in OWN_BLOCKS]


@pytest.fixture(scope="session")  # a module's fixture is torn down whenever xdist runs another module's test in between
def graded_examples(tmp_path_factory):
    done = {}

    def graded(assignment):
        if assignment.name not in done:
            done[assignment.name] = autograded_course(tmp_path_factory, assignment.name, assignment.students(), set())
        return done[assignment.name]
    return graded


@pytest.mark.parametrize("assignment", [pytest.param(a, id=a.name, marks=pytest.mark.xdist_group(f"pipeline-{a.name}"))
                                        for a in OTHERS])
def test_each_example_student_loses_the_tests_their_examples_declare(graded_examples, assignment):
    declared_losses = ROOT / "examples" / assignment.name / "expected.json"
    assert declared_losses.is_file(), f"{declared_losses.relative_to(ROOT)} is missing: list the tests each example " \
                                      "student must lose, {\"student\": [\"notebook/grade_id\", ...]}"
    expected = json.loads(declared_losses.read_text())
    course = graded_examples(assignment)
    table = grades(f"sqlite:///{course / 'gradebook.db'}", assignment.name, course / "release")
    assert sorted(expected) == assignment.students()
    for student, losses in expected.items():
        lost = {f"{nb}/{gid}" for (nb, gid), row in table.items() if row[student][0] < row[student][1]}
        assert lost == set(losses), student

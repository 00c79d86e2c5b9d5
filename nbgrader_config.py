"""nbgrader's configuration for the course: run `nbgrader ...` from this folder."""
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions, Execute, GetGrades, OverwriteCells

from course.grading.nbgrader.autograde import PersonalSeeds, RestoreHiddenTests
from course.grading.nbgrader.trusted import TrustedExecute
from course.grading.nbgrader.feedback import HideHiddenTests
from course.grading.nbgrader.standing import SpeedStanding
from course.grading.nbgrader.release import ClearCudaSolutions, ClearHiddenTestsQuietly, wrap_validate_lines

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "cuda-for-python-programmers"

# A solution inside a CUDA string becomes a C comment, not Python: the released kernel compiles. A test cell
# whose hidden tests are cut ends with `pass`, so it shows no Out[] (validate would read its docstring as a score).
c.GenerateAssignment.preprocessors = [
    {ClearSolutions: ClearCudaSolutions, ClearHiddenTests: ClearHiddenTestsQuietly}.get(p, p)
    for p in GenerateAssignment().preprocessors
]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# One trusted pass: the student's cells run in the notebook's kernel, each test cell is judged by nbgrader's own
# process (course/grading/nbgrader/trusted.py), which asks the kernel only for the answer; the verdict is the cell's output,
# so the scores, the feedback and the export hold verdicts no student code could change. A notebook whose kernel
# dies or hangs keeps the points of the cells before; later cells get none, with the reason in their output
# (nbgrader alone would drop the student's whole assignment). Cell time limits: course/grading/nbgrader/autograde.py
# (10 minutes for a cell that compiles CUDA, 4 for the rest).
c.Autograde.autograde_preprocessors = [
    TrustedExecute if p is Execute else p for p in Autograde().autograde_preprocessors
]
# The notebook's kernel runs in a sandbox (course/sandbox.py): it reads the course package and the notebook's folder,
# writes only a folder of its own, opens no network socket, and what it leaves running is killed with it.
c.Execute.kernel_manager_class = "course.grading.nbgrader.autograde.SandboxedKernelManager"
c.Execute.timeout = 600
c.Execute.startup_timeout = 120
# Once its last cell has run, a notebook's kernel has nothing left to say: kill it rather than wait for a graceful
# shutdown (about 1.7 s a notebook, measured on the CPU machine)
c.Execute.shutdown_kernel = "immediate"

# A test cell released without its hidden tests is not an edit: only real edits of locked cells are
# reported (nbgrader alone warns about every hidden-test cell of every submission). Then each hidden test's
# seed becomes the student's own, derived from the course's .grading_secret (course/grading/nbgrader/seeds.py).
c.Autograde.sanitize_preprocessors = [
    q for p in Autograde().sanitize_preprocessors
    for q in ([RestoreHiddenTests, PersonalSeeds] if p is OverwriteCells else [p])
]

# Feedback says which hidden test passed or failed, with its message, never its code or seed; tracebacks
# keep the student's own frames only. A speed test adds the student's time, ratio and percentile in the class.
c.GenerateFeedback.preprocessors = [
    q for p in GenerateFeedback().preprocessors
    for q in ([p, HideHiddenTests, SpeedStanding] if p is GetGrades else [p])
]

# `nbgrader validate` cuts every line of an error at 87 columns, and with it a check's hint: wrap instead.
wrap_validate_lines()

"""nbgrader's configuration for the course: run `nbgrader ...` from this folder."""
from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import ClearSolutions

from course.release import ClearCudaSolutions

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "cuda-for-python-programmers"

# A solution inside a CUDA string becomes a C comment, not Python: the released kernel compiles.
c.GenerateAssignment.preprocessors = [
    ClearCudaSolutions if p is ClearSolutions else p
    for p in GenerateAssignment().preprocessors
]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# A cold CUDA compile takes about 30 s on a GPU host and a few minutes on a small CPU machine;
# a check runs the kernel in a child process with its own time limit. 10 minutes per cell covers both.
c.Execute.timeout = 600
c.Execute.startup_timeout = 120

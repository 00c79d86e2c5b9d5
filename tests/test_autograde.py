"""The safe execute step: a kernel that dies or hangs keeps earlier points; a kernel that fails to shut down loses nothing."""
import errno

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course.grading.nbgrader.autograde import SafeExecute, cell_timeout

pytestmark = pytest.mark.timeout(300)


def notebook(*sources):
    return new_notebook(cells=[new_code_cell(s) for s in sources],
                        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


def run(pre, nb, tmp_path):
    return pre.preprocess(nb, {"metadata": {"path": str(tmp_path)}})[0]


class ShutdownFails(SafeExecute):
    """Stops the kernel, then fails as ipykernel's control channel did in CI ("Socket operation on non-socket")."""

    def _cleanup_kernel(self):
        super()._cleanup_kernel()
        import zmq
        raise zmq.error.ZMQError(errno.ENOTSOCK)


def test_a_kernel_that_fails_to_shut_down_after_the_last_cell_loses_no_output(tmp_path):
    nb = run(ShutdownFails(), notebook("x = 6 * 7", "print(x)"), tmp_path)
    assert nb.cells[1].outputs[0]["text"] == "42\n"
    assert "course" not in nb.metadata  # nothing was stopped


def test_a_kernel_that_dies_fails_that_cell_and_later_ones_and_keeps_earlier_ones(tmp_path):
    nb = run(SafeExecute(), notebook("print('before')", "import os; os.kill(os.getpid(), 9)", "print('after')"), tmp_path)
    assert nb.cells[0].outputs[0]["text"] == "before\n"
    assert nb.cells[1].outputs[-1]["ename"] == "KernelStopped"
    assert nb.cells[2].outputs[0]["ename"] == "NotRun"
    assert "kernel stopped in cell 1" in nb.metadata["course"]["kernel_stopped"]


def test_cells_that_compile_get_the_longer_time_limit():
    assert cell_timeout(nbformat.from_dict({"source": "m = load_cuda(a, b, ['f'])"})) == 600
    assert cell_timeout(nbformat.from_dict({"source": "check(f)"})) == 240

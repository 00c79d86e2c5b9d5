"""nbgrader's autograde steps for the course: a safe execute step (a notebook whose kernel dies or hangs keeps the
points earned before), the notebook's kernel in a sandbox, hidden tests restored quietly, and hidden random cases of
each student's own."""
import os
from pathlib import Path

from nbformat.notebooknode import NotebookNode
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells

from .release import ClearHiddenTestsQuietly
from ..warm import KERNEL, WarmKernelManager

COMPILE_TIMEOUT = 600  # a cell that compiles CUDA: a cold build takes minutes on a small CPU machine
CELL_TIMEOUT = 240  # any other cell: a check runs a few child processes of at most 60 s each


def cell_timeout(cell):
    """Seconds a cell may run: long for a cell that compiles, shorter for the rest."""
    return COMPILE_TIMEOUT if "load_cuda(" in cell.source or "load_inline(" in cell.source else CELL_TIMEOUT


def error_output(ename, evalue):
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


class SafeExecute(Execute):
    """Execute that, when the kernel dies or stops answering, fails that cell and every later one with the reason."""

    def preprocess(self, nb, resources=None, km=None):
        self._stopped = None
        self._last = max((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), default=-1)
        self._ran_all = self._last < 0
        self.timeout_func = cell_timeout
        try:
            nb, resources = super().preprocess(nb, resources, km)
        except Exception as e:
            if self._stopped is None and not self._ran_all:
                raise
            # Every cell ran (or the kernel had already stopped): only shutting the kernel down failed, e.g.
            # ipykernel's "Socket operation on non-socket". The outputs are all there: keep them.
            self.log.warning("after the notebook ran, stopping its kernel failed (%s); its outputs are kept", e)
        if self._stopped:
            nb.metadata["course"] = {"kernel_stopped": self._stopped}
        return nb, self.resources if resources is None else resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._stopped:
            cell.outputs = [error_output("NotRun", f"this cell did not run: {self._stopped}. It earns no points; "
                                   "the cells before it kept theirs.")]
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            self._ran_all = index == self._last
            self._stop_if_timed_out(cell, index)
            return cell, resources
        except Exception as e:
            self._stop_as_died(e, index)
            cell.outputs.append(self._stopped_output())
            return cell, resources

    def _stop(self, why):
        self._stopped = why
        self.log.warning("%s; the rest of this notebook gets no points", why)

    def _stop_if_timed_out(self, cell, index):
        """Stops the notebook when cell ran past its limit: an interrupt does not stop a kernel stuck in C or on the
        GPU, so stop here, not at each cell. True when it did."""
        if any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
            self._stop(f"cell {index} ran past its limit of {cell_timeout(cell)} s and was stopped (a loop that "
                       "never ends?)")
            return True
        return False

    def _stop_as_died(self, error, index):
        """Stops the notebook: its kernel died (or stopped answering) in cell index with error."""
        text = str(error).strip()
        self._stop(f"the notebook's kernel stopped in cell {index} "
                   f"({type(error).__name__}: {text.splitlines()[0] if text else ''})")

    def _stopped_output(self):
        """The error output of the cell where the notebook stopped."""
        return error_output("KernelStopped", f"{self._stopped}. This cell and every later one earn no points; a crash "
                      "in your own code (e.g. a segfault in C++ called here) or a hang stops the kernel.")


class SandboxedKernelManager(WarmKernelManager):
    """The notebook's kernel in a sandbox (course/sandbox.py): `python -m course.sandbox FOLDER ... -- -m
    ipykernel_launcher ...`, forked warm where a warm process runs. It reads the system, Python, the course package,
    the build folder and the notebook's own folder; it writes only its scratch folder, binds its sockets in
    FOLDER/sockets, and answers the judge in FOLDER/exchange (trusted.py); the connection file is the grader's. When
    the kernel is cleaned up, whatever it left running is killed and its folder removed."""

    folder = exchange = None

    def write_connection_file(self, **kwargs):
        """The kernel's connection file and sockets in a sandbox folder of its own."""
        from course import sandbox
        if sandbox.wanted() and self.transport == "ipc" and not self.connection_file:
            self.folder = sandbox.new_folder("course-kernel-")
            for name in ("sockets", "exchange"):
                (self.folder / name).mkdir(mode=0o777)
                (self.folder / name).chmod(0o777)
            self.exchange = str(self.folder / "exchange")
            self.connection_file = str(self.folder / "kernel.json")
            self.ip = str(self.folder / "sockets" / "kernel-ipc")
        super().write_connection_file(**kwargs)

    def format_kernel_cmd(self, extra_arguments=None):
        """The sandbox's command around the kernel's: the warm stub's when a warm process runs."""
        from ..warmstub import command
        cmd = super(WarmKernelManager, self).format_kernel_cmd(extra_arguments)
        if self.folder is None or cmd[1:3] != ["-m", KERNEL]:
            return super().format_kernel_cmd(extra_arguments)
        return command("course.sandbox", [str(self.folder), "--read", self.connection_file, "--write", self.exchange, "--sockets",
                                          str(Path(self.ip).parent), "--", *cmd[1:]])

    async def _async_cleanup_resources(self, restart=False):
        await super()._async_cleanup_resources(restart)
        if self.folder is not None and not restart:
            from course import sandbox
            sandbox.end(self.folder)


class RestoreHiddenTests(OverwriteCells):
    """OverwriteCells that warns only about real edits: a test cell as released, hidden tests cut, is unchanged.

    nbgrader keeps a test cell's checksum from before its hidden tests are cut, so it reports every
    released hidden-test cell as changed (jupyter/nbgrader#1961), burying a real edit of a locked cell.
    "As released" is what the course's release step makes of the source cell (ClearHiddenTestsQuietly).
    """

    def preprocess_cell(self, cell, resources, index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None:
            try:
                source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source = None
            if source is not None and source.locked and source.source != cell.source:
                released = NotebookNode(source=source.source)
                if (ClearHiddenTestsQuietly(config=self.config)._remove_hidden_test_region(released)
                        and released.source == cell.source):
                    cell.source = source.source
        return super().preprocess_cell(cell, resources, index)


class PersonalSeeds(NbGraderPreprocessor):
    """Gives each student hidden random cases of their own: a test cell's literal seed becomes one derived from
    the course's grading secret and the student's id (course/grading/nbgrader/seeds.py); without a secret, nothing changes."""

    def preprocess(self, nb, resources):
        from .seeds import load_secret, personal_notebook
        student = resources.get("nbgrader", {}).get("student")
        secret = load_secret(os.getcwd())  # nbgrader runs its converters in the course folder
        if student is None or secret is None:
            return nb, resources
        return personal_notebook(nb, student, secret), resources

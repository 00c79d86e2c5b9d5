"""A failed check's traceback as a student should read it: their own cell and kernel, then the message.

The course's frames (a check's insides, a runner's loop) say nothing the message does not, so IPython is
told to leave them out when the course is imported there.
"""
import types
from pathlib import Path

COURSE = str(Path(__file__).resolve().parent)  # the course package's folder


def without_course_frames(tb):
    """A traceback with the frames inside the course package left out (the frame that raised stays if nothing else would)."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    kept = [t for t in frames if not t.tb_frame.f_code.co_filename.startswith(COURSE + "/")] or frames[-1:]
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def install_student_tracebacks(shell=None):
    """In IPython: an error's traceback (a failed check's, a runner's) shows the student's frames, not the course's."""
    if shell is None:
        try:
            shell = get_ipython()  # noqa: F821 (defined where IPython runs)
        except NameError:
            return

    def handler(self, etype, value, tb, tb_offset=None):
        self.showtraceback((etype, value, without_course_frames(tb)), tb_offset=tb_offset)
    shell.set_custom_exc((Exception,), handler)

"""What a kernel's printf writes, caught in the notebook: wurlitzer in one line (taught in drills/07).

A kernel's printf does not go through Python's print: C writes it to the process's standard output (on a
GPU, once the kernel has finished), which a notebook does not show. wurlitzer redirects that output into
Python while a with-block runs; capture_stdout() also waits for the GPU before the block ends.
"""
import contextlib
from dataclasses import dataclass, field

from .device import synchronize


@dataclass
class Captured:
    """What C code wrote while capture_stdout() ran: text, and lines without their newlines."""
    text: str = ""
    errors: str = ""  # what it wrote to stderr
    lines: list = field(default_factory=list)


@contextlib.contextmanager
def capture_stdout():
    """`with capture_stdout() as out:` catches what C code (a kernel's printf) writes in the block; then out.lines (taught in drills/07)."""
    from wurlitzer import pipes
    out = Captured()
    with pipes() as (stdout, stderr):
        try:
            yield out
        finally:
            synchronize()  # a GPU's printf reaches stdout when its kernel has finished
    out.text, out.errors = stdout.read(), stderr.read()
    out.lines = out.text.splitlines()


def printed(fn, *args):
    """Calls fn(*args) and returns (its result, the lines C code printed meanwhile) (taught in drills/07)."""
    with capture_stdout() as out:
        result = fn(*args)
    return result, out.lines

"""The Python rungs' runner: the student's function on each input of a case, quiet, time-limited, outputs pre-filled."""
import contextlib
from dataclasses import replace
import io
import signal
import threading
import time

import torch

from ..ladder import recording
from .limit import TimedOut, time_limit
from . import contract
from .evidence import python_words, runner_hint, timeout_hint
from .exercise import element_of, fill_byte, unwritten, with_hint
from .origin import python_facts, with_facts
from .rungs import PYTHON

PYTHON_TIMEOUT = 60  # seconds: the slowest right answer takes a few seconds on the largest Python case


def _filled(make):
    def filled(*args, **kwargs):
        t = make(*args, **kwargs)
        if t.numel() and t.dtype != torch.bool and t.is_contiguous():
            t.view(-1).view(torch.uint8).fill_(fill_byte(t.dtype))
        return t
    return filled


@contextlib.contextmanager
def prefilled():
    """torch.empty and its kin hand out memory holding the fill pattern, as the CUDA checks' outputs do."""
    patched = [(torch, "empty"), (torch, "empty_like"), (torch, "empty_strided"), (torch.Tensor, "new_empty")]
    saved = [getattr(owner, name) for owner, name in patched]
    try:
        for (owner, name), make in zip(patched, saved):
            setattr(owner, name, _filled(make))
        yield
    finally:
        for (owner, name), make in zip(patched, saved):
            setattr(owner, name, make)


def call_quietly(fn, args, what, where, seconds=None, hang_hint=None):
    """Calls fn(*args) with its printing captured, a time limit and pre-filled outputs; a failure becomes an AssertionError."""
    return call_recorded(fn, args, what, where, seconds, hang_hint)[0]


def call_recorded(fn, args, what, where, seconds=None, hang_hint=None, reversed=False, alone=None):
    """call_quietly's (what fn returned, the record of what the runners did in the call: ladder.recording); alone: the
    picks of the threads each launch runs alone for the one-thread contract (harness/contract.py)."""
    seconds = seconds or PYTHON_TIMEOUT
    try:
        with recording(reversed, alone) as ran, time_limit(seconds), prefilled(), \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return fn(*args), ran
    except TimedOut as e:
        try:
            why = hang_hint or getattr(e, "hint", None) or timeout_hint(e.__traceback__, ran, seconds)
        except Exception:  # reading the evidence must never hide the verdict
            why = None
        why = why or ("a loop that never ends, or a kernel that loops over every element itself although "
                      "run_kernel and blk_kernel already call it once per element.")
        raise AssertionError(f"{what} did not finish within {seconds} s for {where} and was stopped: it ran past the "
                             f"check's time limit. Hint: {why}") from None
    except Exception as e:
        raise AssertionError(f"{what} raised {type(e).__name__} for {where}: {e}") from e


_inputs = threading.local()  # per thread: the Cases a check ran (seen, for the judge) or is to run (given, in the kernel)


@contextlib.contextmanager
def inputs_seen():
    """A list that gets the Cases the Python checks of this thread run while the block runs: the judge sends a failed
    hidden test's inputs, never its seed, to the kernel that words its message (grading/nbgrader/trusted.py)."""
    _inputs.seen = seen = []
    try:
        yield seen
    finally:
        _inputs.seen = None


@contextlib.contextmanager
def inputs_given(cases):
    """The Python checks of this thread run on these Cases instead of their case's own (a hidden test's, sent without
    its seed); the dict yielded says whether a check took them ("used")."""
    _inputs.given = given = {"cases": list(cases), "used": False}
    try:
        yield given
    finally:
        _inputs.given = None


def case_inputs(exercise, case, seed):
    """The Cases a check of a Python-rung exercise runs: its case's own, or those inputs_given gave this thread."""
    given = getattr(_inputs, "given", None)
    if given is None:
        return exercise.inputs(case, seed, PYTHON)
    given["used"] = True
    return given["cases"]


def answers(exercise, fn, case, seed=None, hang_hint=None):
    """Calls fn on every input of a case of an exercise, quiet and time-limited: yields (Case, answer, milliseconds, record).

    An error fn raises is the verdict, unless the exercise's raised(error, case, what) accepts it as the answer.
    """
    if not callable(fn):
        raise TypeError(f"pass your function itself, e.g. check_...({exercise.name}_py), not {fn!r}")
    what = getattr(fn, "__name__", "your function")
    seen = getattr(_inputs, "seen", None)
    for c in case_inputs(exercise, case, seed):
        if seen is not None:
            seen.append(c)
        before = [a.clone() if isinstance(a, torch.Tensor) else a for a in c.args]
        start = time.perf_counter()
        try:
            yours, ran = call_recorded(fn, c.args, what, c.where, hang_hint=hang_hint,
                                       alone=contract.picks(exercise, c.where, seed))
        except AssertionError as e:
            if exercise.raised is None:
                raise
            exercise.raised(e, c, what)
            continue
        ms = (time.perf_counter() - start) * 1e3
        if any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(c.args, before)):
            raise AssertionError(f"{what} changed its input for {c.where}. "
                                 "Hint: write only into the output tensor.")
        yield c, yours, ms, ran


def print_passed(exercise, what, case):
    """Prints the one line of a passed check."""
    print(f"{what}: {case} passed{exercise.passed.get(case, '')}")


def check_python(exercise, fn, case, seed=None, hang_hint=None):
    """Judges a Python-rung function on every input of a case: AssertionError at the first wrong answer, else the records."""
    what, records = getattr(fn, "__name__", "your function"), []
    for c, yours, _, ran in answers(exercise, fn, case, seed, hang_hint):
        records.append(ran)
        never = unwritten(yours)
        try:  # the hints speak the lesson's names, the student's own where the source shows them
            words = {**PYTHON.words, **python_words(ran.get("kernel") or fn)}
        except Exception:  # reading the evidence must never hide the verdict
            words = PYTHON.words
        try:
            exercise.judge(yours, replace(c, words=words), what, never)
        except AssertionError as e:
            # What the runners did (no thread, too few, kernels returning their values) outweighs what the
            # output alone suggests, when the judge found wrong elements that were never written.
            seen = (runner_hint(ran, exercise.threads_for(c, yours), bool(never.all()), never,
                                unit="row" if exercise.work_on("python") == "row" else "element")
                    if never is not None and "never written" in str(e) else None)
            e = with_hint(e, seen) if seen else e
            if element_of(e) is not None:
                try:
                    e = with_facts(e, python_facts(yours, e.element, ran, exercise.work_on("python")))
                except Exception:  # reading the evidence must never hide the verdict
                    pass
            raise e from None
        contract.check(exercise, ran.get("contract", []), yours, what, c.where)  # only a right output meets it
    print_passed(exercise, what, case)
    return records

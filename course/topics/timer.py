"""Checking a student's timer (drills/04): it must wait for the GPU, leave out the first calls and report milliseconds.

The timer gets work that behaves like a kernel launch (course.timing.AsyncWork: the call returns at once, the
work is done by the next synchronize()) or like a kernel whose first call is slow (SlowFirstCall), and must
report how long one call's work takes. A timer that reads the clock without waiting measures the launch alone.
"""
import torch

from ..device import synchronize
from ..harness.exercise import Case, Exercise, judges
from ..harness.python import answers, print_passed
from ..harness.rungs import PYTHON
from ..timing import AsyncWork, SlowFirstCall

__all__ = ("check_timer",)

WORK_MS = 20.0  # one call's work in the "waits" case: long against a launch (microseconds), short for a check
FIRST_MS, LATER_MS = 600.0, 10.0  # the "warmup" case: a slow first call (the mean of 20 with it: 40 ms), then fast ones
SLACK = (0.8, 2.5)  # a right timer reports between 0.8 and 2.5 times the work (sleeps overshoot, never undershoot)


def timer_cases(case, seed, rung):
    """The work each case hands the timer: one callable, called with no arguments."""
    if case == "waits":
        return [Case(f"work that runs like a kernel launch ({WORK_MS:g} ms, finished by synchronize())",
                     (AsyncWork(WORK_MS),))]
    return [Case(f"work whose first call takes {FIRST_MS:g} ms and every later one {LATER_MS:g} ms",
                 (SlowFirstCall(FIRST_MS, LATER_MS),))]


def judge_timer(yours, case, what, wall_ms, left_running=False):
    """Asserts the timer reported one call's time in milliseconds, within SLACK of the true time.

    wall_ms: how long the timer ran; left_running: whether work it started was unfinished when it returned.
    """
    work, where = case.args[0], case.where
    want = work.ms
    if isinstance(yours, torch.Tensor) and yours.numel() == 1:
        yours = yours.item()
    if isinstance(yours, bool) or not isinstance(yours, (int, float)):
        raise AssertionError(f"{what} returned {type(yours).__name__} {yours!r} for {where}, not a number. "
                             "Hint: return the median time of one call in milliseconds, a float.")
    lo, hi = SLACK[0] * want, SLACK[1] * want
    if lo <= yours <= hi:
        return
    msg = (f"{what} reported {yours:.4g} ms for {where}; one call takes {want:g} ms (a right timer reports {lo:g} to "
           f"{hi:g}). The whole timing took {wall_ms:.0f} ms.")
    # It waited if it left nothing running, or if it ran long enough to have waited for all but the last call
    # (judged by what is left, not by time alone: on a busy machine, calls that never wait can add up to 20 ms).
    waited = not left_running or wall_ms >= 0.8 * want * max(1, getattr(work, "calls", 1) - 1)
    if isinstance(work, AsyncWork) and not waited:
        hint = ("it stopped the clock before the work was done, and never waited for it: a launch returns at once "
                "and the GPU works on after it, so the clock measured the launch alone. Call synchronize() before "
                "starting the clock and again before stopping it.")
    elif lo / 1e3 <= yours <= hi / 1e3:
        hint = "that is the time in seconds: time.perf_counter() counts seconds; multiply by 1000 for milliseconds."
    elif lo * 1e3 <= yours <= hi * 1e3:
        hint = "that is the time in microseconds: report milliseconds."
    elif isinstance(work, AsyncWork) and yours < lo:
        hint = ("the work was waited for, but not inside the clock: the clock stopped before synchronize() returned. "
                "Call synchronize() after the call and before reading the clock the second time.")
    elif isinstance(work, SlowFirstCall) and yours > hi:
        hint = (f"the first call ({FIRST_MS:g} ms: loading code, filling caches) pulled the answer up: make a few "
                "calls before you start measuring (warm-up), and report the median of the repeats, which one slow "
                "call cannot move.")
    elif yours > hi:
        hint = ("that is more than one call takes: if you divide a total by the number of calls, divide by the calls "
                "you timed, and report the median of the repeats.")
    else:
        hint = ("time one call at a time: synchronize(), read the clock, call, synchronize(), read it again; "
                "repeat, and report the median in milliseconds.")
    raise AssertionError(f"{msg}\nHint: {hint}")


TIMER = Exercise(name="timer", topic=__name__, cases=timer_cases, case_names={"python": ("waits", "warmup")},
                 judge=judge_timer)


@judges(PYTHON)
def check_timer(fn, case="waits"):
    """Checks a timer fn(work) -> milliseconds: "waits" (work that runs like a launch) or "warmup" (a slow first call)."""
    what = getattr(fn, "__name__", "your timer")
    for c, yours, wall_ms, _ in answers(TIMER, fn, case):
        work = c.args[0]
        left_running = isinstance(work, AsyncWork) and work.pending()
        synchronize()  # what the timer left running is not the next case's, nor the notebook's
        TIMER.judge(yours, c, what, wall_ms, left_running)
    print_passed(TIMER, what, case)

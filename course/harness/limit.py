"""A Python-rung call's time limit: the student's function is stopped where it runs, in the main thread."""
import contextlib
import signal
import threading


class TimedOut(BaseException):
    """Raised inside a student's function when it runs past the check's time limit."""


@contextlib.contextmanager
def time_limit(seconds):
    """Raises TimedOut in the main thread after seconds (no limit elsewhere: signals reach the main thread only)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def stop(signum, frame):
        raise TimedOut()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

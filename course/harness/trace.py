"""Where a check's time goes: its phases as JSON lines in the file $COURSE_TRACE names (benchmarks/grading.py --trace).

Each mark is one line: the time, the process, what happened and the check it belongs to (the folder of its job).
Without COURSE_TRACE nothing is written."""
import json
import os
import time

VARIABLE = "COURSE_TRACE"


def mark(what, key="", **facts):
    """Appends one mark to the trace, if one is asked for: what happened, to which check (key), and any facts."""
    path = os.environ.get(VARIABLE)
    if not path:
        return
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "what": what, "key": str(key), **facts}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write under O_APPEND: lines from many processes never interleave
    finally:
        os.close(fd)


def key_of(path):
    """The check a job's file belongs to: its folder's name."""
    return os.path.basename(os.path.dirname(str(path)))


def phases(path):
    """The trace's marks grouped by check: {key: {what: [times]}}, plus the marks without a check under ""."""
    checks = {}
    with open(path) as f:
        for line in f:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            checks.setdefault(m["key"], {}).setdefault(m["what"], []).append(m["t"])
    return checks

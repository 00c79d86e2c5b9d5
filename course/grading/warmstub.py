"""`warmstub.py SOCKET MODULE ARGS...`: asks the warm process (course/grading/warm.py) to fork `python -m MODULE ARGS`, then stands in for it.

Run by path with the standard library only (importing the course would import torch, the cost this saves).
Whoever started this process (Jupyter, for a kernel) signals and kills it; signals are passed on to the forked
process, and when this process ends, however it ends, that process and everything it started end too (it
watches a pipe only this process holds open). When whoever started this process goes away, so does this one.
Its exit status is the forked process's. Imported, it gives command(), the command line that runs it.
"""
import json
import os
import signal
import socket
import sys
import threading
import time

SOCKET_ENV = "COURSE_WARM_KERNELS"  # the warm process's socket, set for the processes that may use it


def command(module, args, env=None):
    """The command that runs `python -m module args`: forked from the warm process where the environment (this
    process's) names one."""
    path = (os.environ if env is None else env).get(SOCKET_ENV)
    if path and os.path.exists(path):
        return [sys.executable, "-I", "-S", os.path.abspath(__file__), path, module, *args]
    return [sys.executable, "-m", module, *args]


def main(argv):
    """Asks the warm process for the process, passes signals on to it, exits with its status."""
    sock_path, module, args = argv[1], argv[2], argv[3:]
    lifeline_r, lifeline_w = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock_path)
    request = json.dumps({"module": module, "argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode() + b"\n"
    socket.send_fds(conn, [request], [0, 1, 2, lifeline_r])
    os.close(lifeline_r)
    reader = conn.makefile("rb")
    line = reader.readline()
    if not line:
        sys.exit(f"the warm process did not start {module}")
    pid = json.loads(line)["pid"]

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, forward)

    def orphaned(parent=os.getppid()):
        while os.getppid() == parent:
            time.sleep(1)
        forward(signal.SIGKILL, None)
        os._exit(1)
    threading.Thread(target=orphaned, daemon=True).start()
    while True:
        try:
            line = reader.readline()
            break
        except InterruptedError:
            continue
    if not line:  # the warm process went away: take the forked process with us
        forward(signal.SIGKILL, None)
        os._exit(1)
    code = json.loads(line)["exit"]
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv)

"""The process Jupyter starts for a warm kernel: it asks the warm process (course/grading/warm.py) to fork the kernel, then stands in for it.

Run by path with the standard library only (importing the course would import torch, the cost this saves).
Jupyter signals and kills this process; signals are passed on to the kernel, and when this process ends,
however it ends, the kernel and everything it started end too (the kernel watches a pipe only this process
holds open). Its exit status is the kernel's.
"""
import json
import os
import signal
import socket
import sys


def main(argv):
    """Asks the warm process for a kernel, passes signals on to it, exits with its status."""
    sock_path, kernel_args = argv[1], argv[2:]
    lifeline_r, lifeline_w = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock_path)
    request = json.dumps({"argv": kernel_args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode() + b"\n"
    socket.send_fds(conn, [request], [0, 1, 2, lifeline_r])
    os.close(lifeline_r)
    reader = conn.makefile("rb")
    line = reader.readline()
    if not line:
        sys.exit("the warm kernel process did not start a kernel")
    pid = json.loads(line)["pid"]

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, forward)
    while True:
        try:
            line = reader.readline()
            break
        except InterruptedError:
            continue
    if not line:  # the warm process went away: take the kernel with us
        forward(signal.SIGKILL, None)
        os._exit(1)
    code = json.loads(line)["exit"]
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv)

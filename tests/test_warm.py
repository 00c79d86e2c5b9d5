"""Processes forked from the grading run's warm process (course/grading/warm.py), and the grading's kernels' sockets.

`course grade` forks its workers, their check servers and their notebooks' kernels from one process that has
imported torch, nbgrader and the course: each must behave as `python -m MODULE ARGS` would (arguments, folder,
output, exit status) and end when the process standing in for it (warmstub.py) is killed.
"""
import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from course.grading import warmstub
from course.grading.warm import WarmKernelManager, WarmKernels, command


@pytest.fixture(scope="module")
def warm():
    kernels = WarmKernels()
    try:
        assert kernels.wait_ready()
        yield kernels
    finally:
        kernels.close()


def forked_children(pid):
    """The pids whose parent is pid (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def test_command_is_python_m_without_a_warm_process():
    assert command("json.tool", ["a.json"], env={}) == [sys.executable, "-m", "json.tool", "a.json"]
    assert command("json.tool", [], env={"COURSE_WARM_KERNELS": "/nonexistent/socket"})[1:] == ["-m", "json.tool"]


def test_a_forked_module_gets_its_arguments_folder_streams_and_exit_status(warm, tmp_path):
    env = {**os.environ, **warm.env()}
    cmd = command("json.tool", ["good.json"], env)
    assert cmd[3] == warmstub.__file__  # forked, not started
    (tmp_path / "good.json").write_text('{"b": [1, 2]}')
    (tmp_path / "bad.json").write_text('{"b": ')
    good = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert good.returncode == 0 and json.loads(good.stdout) == {"b": [1, 2]}, good.stderr
    bad = subprocess.run(command("json.tool", ["bad.json"], env), cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 1 and "Expecting value" in bad.stderr


def test_killing_the_stub_ends_the_forked_process(warm, tmp_path):
    env = {**os.environ, **warm.env()}
    before = set(forked_children(warm.proc.pid))
    stub = subprocess.Popen(command("timeit", ["-n", "10000000000", "pass"], env), cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (new := set(forked_children(warm.proc.pid)) - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert new, "the warm process forked nothing"
    os.killpg(stub.pid, signal.SIGKILL)
    stub.wait()
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") and "Z" not in open(f"/proc/{pid}/stat").read().split(")")[1][:3]
              for pid in new) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [pid for pid in new if os.path.exists(f"/proc/{pid}")
             and open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not alive, "the forked process outlived its stub"


def test_grading_kernels_listen_on_socket_files_of_their_own(tmp_path):
    async def start_two():
        managers = [WarmKernelManager(kernel_name="python3") for _ in range(2)]
        await asyncio.gather(*(m.start_kernel(cwd=str(tmp_path)) for m in managers))
        try:
            info = [m.get_connection_info() for m in managers]
            for m in managers:
                client = m.client()
                client.start_channels()
                await client.wait_for_ready(timeout=60)
                client.stop_channels()
            sockets = [sorted(p for p in os.listdir(os.path.dirname(m.ip)) if p.startswith(os.path.basename(m.ip)))
                       for m in managers]
        finally:
            await asyncio.gather(*(m.shutdown_kernel(now=True) for m in managers))
        left = [p for m in managers for p in os.listdir(os.path.dirname(m.ip)) if p.startswith(os.path.basename(m.ip))]
        return info, sockets, left

    info, sockets, left = asyncio.run(start_two())
    assert [i["transport"] for i in info] == ["ipc", "ipc"]  # no TCP port another worker's kernel could take
    assert info[0]["ip"] != info[1]["ip"] and all(len(s) == 5 for s in sockets)
    assert left == []

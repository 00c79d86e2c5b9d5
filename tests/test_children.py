"""Check children that start fast: the server imports what a child asks for once, before it forks (forkserver.py);
spares (spare.py), started ahead, do the job they are handed, report its exit status and output like a child started
for it, are stopped at the time limit, and end when their owner has gone."""
import os
import subprocess
import sys
import time

from course.harness import spare
from course.harness.forkserver import Server

# the kept spare's tests load _announce from this file: their sandbox may read it (course/sandbox.py)
os.environ.setdefault("COURSE_SANDBOX_READ", os.path.dirname(os.path.abspath(__file__)))


def _gone(pid, within=20):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our own child: reap it, or it lingers as a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.2)
    return False


def test_a_prepared_spare_is_the_one_taken_and_does_its_job(tmp_path):
    spare.prepare([], None)
    waiting = spare._spares[spare._key([], None)]
    taken = spare.take([], None)
    assert taken is waiting and taken.alive()
    assert taken.run("warm", [], tmp_path / "log.txt", 120) == 0
    assert not taken.alive() and not os.path.exists(taken.folder)
    assert spare.take([], None) is not taken  # a spare does one job


def test_a_failing_job_reports_its_status_and_traceback(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("before\n")
    assert spare.take([], None).run("judge", [tmp_path / "no-job.pt", "x", "y"], log, 120) == 1
    text = log.read_text()
    assert text.startswith("before\n") and "Traceback" in text and "no-job.pt" in text


def test_a_job_past_its_time_limit_is_stopped(tmp_path):
    never = tmp_path / "never"
    never.mkdir()
    s = spare.take([], None)
    start = time.monotonic()
    assert s.run("wait", [never, os.getpid()], tmp_path / "log.txt", 8) is None  # waits for a job nobody gives
    assert time.monotonic() - start < 30 and not s.alive()


def _announce(job):
    """A loader for the kept spare's tests: prints its process id, then raises or exits when the job's func says so."""
    print(f"pid {os.getpid()} for {job.func}", flush=True)
    if job.func == "raise":
        raise ValueError("this job fails")
    if job.func == "exit":
        os._exit(3)
    return lambda: None


def _kept_job(tmp_path, name, answer="answer.so"):
    from course.harness import wire
    from course.harness.wire import Job, Result
    folder = tmp_path / name
    folder.mkdir()
    wire.write(Job(module="unused", func=name, inputs=[], fills=[], mode="run", cpu=False,
                   loader="tests.test_children:_announce"), folder / "job.pt")
    code = spare.run_kept("run", [folder / "job.pt", folder / "result.pt"], folder / "log.txt", 120, dict(os.environ),
                          answer)
    result = wire.read(folder / "result.pt", Result) if (folder / "result.pt").exists() else None
    text = (folder / "log.txt").read_text()
    return code, result, text.split()[1] if text.startswith("pid ") else None, text


def test_a_kept_spare_does_one_answers_jobs_one_after_another_while_its_process_is_sound(tmp_path):
    slots = lambda: spare._kept[spare._key([], dict(os.environ))]  # noqa: E731
    try:
        code, result, pid, log = _kept_job(tmp_path, "first")
        kept = slots()["used"]
        assert code == 0 and result.error is None and log.strip() == f"pid {pid} for first"  # the job's own log
        code, result, again, log = _kept_job(tmp_path, "raise")  # an error of the student's function: kept
        assert code == 0 and "this job fails" in result.error and again == pid and slots()["used"] is kept
        code, result, again, log = _kept_job(tmp_path, "exit")  # a process that ends: a new one, started at once
        assert code == 3 and result is None and again == pid and _gone(kept.proc.pid)
        waiting = slots()["fresh"]
        assert waiting.alive() and "used" not in slots()
        code, result, new, log = _kept_job(tmp_path, "after")
        assert code == 0 and new != pid and slots()["used"] is waiting
        code, result, other, log = _kept_job(tmp_path, "another answer", answer="other.so")  # never shared
        assert code == 0 and other != new and _gone(waiting.proc.pid)
    finally:
        spare._close_all()


def test_a_spare_ends_itself_when_its_owner_has_gone():
    owner = subprocess.run([sys.executable, "-c", "from course.harness.spare import Spare; "
                            "print(Spare([], None).proc.pid)"], capture_output=True, text=True, timeout=60)
    assert _gone(int(owner.stdout.split()[-1]))


def test_the_server_imports_what_a_child_asks_for_once_before_it_forks(tmp_path):
    (tmp_path / "marker.py").write_text(f"import os\nopen({str(tmp_path / 'pids')!r}, 'a').write(f'{{os.getpid()}}\\n')\n")
    server = Server(env=dict(os.environ, PYTHONPATH=f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"))
    try:
        for _ in range(2):
            assert server.run("warm", [], tmp_path / "log.txt", 120, imports=["marker"]) == 0
        pids = (tmp_path / "pids").read_text().split()
        assert len(pids) == 1 and int(pids[0]) == server.proc.pid
    finally:
        server.close()


def test_compute_sanitizers_report_is_read_even_when_a_long_crash_report_follows_it(tmp_path):
    # A Triton kernel's fault under memcheck: the report, then PyTorch's abort with a stack of 20 frames (seen on the
    # H200), which pushed the report out of the log's last 4,000 characters and left the raw CUDA error as the verdict.
    import pytest
    from course.harness import children as cuda
    log = tmp_path / "output.txt"
    log.write_text("========= Invalid __global__ read of size 1 bytes\n=========     at rgb2grey_kernel+0x1d0\n"
                   + "".join(f"frame #{k}: c10::Error::Error() + 0x9d (0x7f1b in libc10.so)\n" for k in range(200))
                   + "========= ERROR SUMMARY: 5 errors\n")
    with pytest.raises(cuda.OutOfBounds, match="5 errors; the first: Invalid __global__ read of size 1 bytes"):
        cuda._sanitizer_verdict("memory", cuda.SANITIZER_EXIT, cuda._sanitizer_lines(log))
    cuda._sanitizer_verdict("memory", cuda.SANITIZER_EXIT, cuda.log_tail(log))  # the tail alone finds nothing


def test_the_server_children_are_forked_from_has_the_environment_of_the_call(tmp_path, monkeypatch):
    # A test module points COURSE_BUILD_DIR at a folder of its own after another started the server: a sandboxed child
    # of the old server read the old folder only, and could not open the module just built ("Permission denied").
    from course.harness import children
    (tmp_path / "marker.py").write_text(f"import os\nopen({str(tmp_path / 'dirs')!r}, 'a')"
                                        ".write(os.environ['COURSE_BUILD_DIR'] + '\\n')\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    for folder in ("first", "second", "second"):
        monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path / folder))
        assert children.in_child("warm", [], tmp_path / "log.txt", 120, imports=["marker"]) == 0
    assert (tmp_path / "dirs").read_text().split() == [str(tmp_path / "first"), str(tmp_path / "second")]


def test_a_child_running_when_the_environment_changes_still_reports_its_status(tmp_path, monkeypatch):
    # A compile sets TORCH_CUDA_ARCH_LIST while another thread's child runs: the next check got a server of the new
    # environment and closed the old one under the running child ("the check server stopped": a GraderFault for a
    # right answer in the corpus, CPU mode, two workers).
    import threading
    from course.harness import children
    never = tmp_path / "never"
    never.mkdir()
    owner = subprocess.Popen(["sleep", "4"])  # the waiting child ends once its owner has gone (and is reaped)
    threading.Thread(target=owner.wait, daemon=True).start()
    got = {}

    def first():
        start = time.monotonic()
        got["status"] = children.in_child("wait", [never, owner.pid], tmp_path / "first.txt", 60)
        got["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(1.5)
    monkeypatch.setenv("COURSE_TEST_CHANGED", "1")
    assert children.in_child("warm", [], tmp_path / "second.txt", 120) == 0
    thread.join(60)
    assert isinstance(got.get("status"), int) and got["seconds"] > 2, (got, (tmp_path / "first.txt").read_text())

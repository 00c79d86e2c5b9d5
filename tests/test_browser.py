"""The student's path in a real browser: JupyterLab serves the course, a released notebook filled with an
example student's answers runs top to bottom, and nbgrader's Validate button reports what it finds.

Needs Debian's chromium and the `playwright` package (`.ci/browser-deps`, then the `test` extra); without
them the browser tests are skipped, unless COURSE_BROWSER_TEST=required, which makes that a failure.
Screenshots of the Validate dialogs and the server's log go to COURSE_REPORT_DIR when it is set.
"""
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from course.grading.commands.examples import answers_in, fill
from tests.support import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser"), pytest.mark.timeout(1200)]

CHROMIUM = "/usr/bin/chromium"
# --disable-dev-shm-usage: a container's small /dev/shm crashes chromium (Debian's launcher means to add it).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "course-browser-test"
ASSIGNMENT = "grayscale"
NOTEBOOK = f"{ASSIGNMENT}/01_L0_loop.ipynb"
STUDENTS = ("alice", "bob")
SUCCESS = "Success! Your notebook passes all the tests."  # what @jupyter/nbgrader 0.9's dialog says
# Seconds: the kernel's first `import torch` takes several, and Validate re-executes the whole notebook.
SERVER_START, KERNEL_START, RUN_ALL, VALIDATE = 120, 180, 400, 400
PANEL = ".jp-NotebookPanel"
ERRORS = f'{PANEL} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'  # tracebacks, stderr
REPORT = Path(os.environ["COURSE_REPORT_DIR"]) if os.environ.get("COURSE_REPORT_DIR") else None


def missing_prerequisite():
    """What this machine lacks for the browser tests, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is missing"
    return None


def free_port():
    """A TCP port on the loopback interface that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(base, path, method="GET"):
    """Calls the Jupyter server's REST API with the test's token; returns the decoded JSON."""
    request = urllib.request.Request(f"{base}{path}", method=method, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def kernel_ready(base, path):
    """Whether the server runs an idle kernel for the notebook at path, with a page connected to it."""
    return any(session["path"] == path and session["kernel"]["execution_state"] == "idle"
               and session["kernel"]["connections"] > 0 for session in api(base, "/api/sessions"))


def log_tail(log, lines=60):
    """The end of the server's log, for failure messages."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def processes_with(variable):
    """The ids of this user's processes started with variable ("NAME=value") in their environment."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                mine = entry.stat().st_uid == os.getuid()
                if mine and variable.encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def stop_server(proc, base, variable):
    """Shuts the server down with its kernels, then kills whatever it started that is left (kernels run in
    sessions of their own: the notebooks' and nbgrader's, all started with variable in their environment)."""
    if proc.poll() is None:
        try:
            api(base, "/api/shutdown", method="POST")
            proc.wait(timeout=30)
        except Exception:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for pid in processes_with(variable):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def prerequisites():
    """Skips the browser tests on a machine without chromium or playwright (or fails them, when required)."""
    reason = missing_prerequisite()
    if reason and os.environ.get("COURSE_BROWSER_TEST") == "required":
        pytest.fail(f"{reason}: run .ci/browser-deps (Debian's chromium) and install the `test` extra "
                    f"(pip install -e '.[test]', for playwright)", pytrace=False)
    if reason:
        pytest.skip(f"{reason} (run .ci/browser-deps and install the `test` extra; "
                    f"COURSE_BROWSER_TEST=required makes this a failure)")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder as JupyterLab serves it, with each student's filled copy of the L0 notebook."""
    course = tmp_path_factory.mktemp("course")
    for name in ("release", "source"):
        shutil.copytree(ROOT / name, course / name)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    released = nbformat.read(ROOT / "release" / NOTEBOOK, as_version=4)
    for student in STUDENTS:
        answers = answers_in(ROOT / "examples" / ASSIGNMENT / student)
        assert "rgb2grey_py" in answers, f"examples/{ASSIGNMENT}/{student} has no answer for the L0 exercise"
        path = course / student / NOTEBOOK
        path.parent.mkdir(parents=True)
        nbformat.write(fill(released, answers), path)
    return course


@pytest.fixture(scope="module")
def lab(prerequisites, course):
    """JupyterLab serving the course folder on a free loopback port; yields its base URL."""
    jupyter = Path(tempfile.mkdtemp(prefix="jupyter-"))
    marker = ("COURSE_BROWSER_TEST_LAB", str(jupyter))  # inherited by every process the server starts
    env = {**os.environ, marker[0]: marker[1],
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           # Nothing from the user's Jupyter configuration, settings or saved workspaces.
           "JUPYTER_CONFIG_DIR": str(jupyter / "config"),
           "JUPYTER_RUNTIME_DIR": str(jupyter / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(jupyter / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(jupyter / "workspaces")}
    env.pop("MPLBACKEND", None)  # the kernel's inline backend: the figures show, as they do for a student
    notifications = jupyter / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notifications.parent.mkdir(parents=True)
    notifications.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))  # no news toast
    port = free_port()
    base, log = f"http://127.0.0.1:{port}", jupyter / "jupyterlab.log"
    args = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={course}",
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    # cwd: nbgrader's Validate reads nbgrader_config.py from the server's working directory.
    with open(log, "w") as out:
        proc = subprocess.Popen(args, cwd=course, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{log_tail(log)}")
            try:
                api(base, "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer within {SERVER_START} s:\n{log_tail(log)}")
                time.sleep(0.5)
        yield base
    finally:
        stop_server(proc, base, "=".join(marker))
        if REPORT:
            REPORT.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, REPORT / "jupyterlab.log")
        shutil.rmtree(jupyter, ignore_errors=True)


@pytest.fixture(scope="module")
def browser(prerequisites):
    """Debian's chromium, headless, driven by Playwright."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def save_screenshot(page, name):
    """Saves the page as it looks now into COURSE_REPORT_DIR (or a temporary folder); returns the path."""
    folder = REPORT or Path(tempfile.gettempdir()) / "course-browser-test"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=path)
    return path


@contextlib.contextmanager
def notebook_page(browser, base, student):
    """A fresh page showing the student's notebook with its kernel idle; on a failure, a screenshot and the
    browser's console."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    page = context.new_page()
    console = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    try:
        # A workspace per student: JupyterLab restores no other notebook into the page.
        page.goto(f"{base}/lab/workspaces/{student}/tree/{student}/{NOTEBOOK}?token={TOKEN}")
        page.locator(f"{PANEL} .jp-Cell").first.wait_for()
        # The toolbar's kernel indicator reads "idle" before any kernel exists (cells run then are skipped
        # silently), so the server says when the notebook's kernel is up and the page is connected to it.
        dialog = page.locator(".jp-Dialog")
        deadline = time.monotonic() + KERNEL_START
        while not kernel_ready(base, f"{student}/{NOTEBOOK}"):
            if dialog.is_visible():  # "Select Kernel": take the one JupyterLab proposes
                dialog.locator(".jp-mod-accept").click()
            assert time.monotonic() < deadline, f"no idle kernel for {student}'s notebook after {KERNEL_START} s"
            page.wait_for_timeout(250)
        page.locator(f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for()
        yield page
    except BaseException:
        shot = save_screenshot(page, f"{student}-failure")
        shot.with_suffix(".console.txt").write_text("\n".join(console) + "\n")
        raise
    finally:
        context.close()


def run_all_cells(page):
    """Runs every cell from the Run menu; waits until each code cell has its execution count (or the run
    stopped at an error) and the kernel is idle."""
    page.locator(f"{PANEL} .jp-Cell .jp-InputPrompt").first.click()  # the notebook is what the Run menu acts on
    page.locator(".lm-MenuBar-item").filter(has_text=re.compile(r"^Run$")).click()
    page.locator('#jp-mainmenu-run .lm-Menu-item[data-command="runmenu:run-all"]:not(.lm-mod-disabled)').click()
    page.wait_for_function(
        """([prompts, errors]) => {
            const counts = [...document.querySelectorAll(prompts)].map(p => p.textContent.trim());
            const done = counts.length > 0 && counts.every(c => /^\\[\\d+\\]:$/.test(c));
            const stopped = document.querySelector(errors) !== null && !counts.includes("[*]:");
            return done || stopped;
        }""", arg=[f"{PANEL} .jp-CodeCell .jp-InputPrompt", ERRORS], timeout=RUN_ALL * 1000, polling=250)
    page.locator(f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for()


def validate(page):
    """Clicks nbgrader's Validate button; returns the result dialog's verdict (validation-success,
    validation-failed, ...: the class nbgrader gives its message) and text."""
    page.locator(f"{PANEL} jp-button.validate-button").click()
    message = page.locator(".jp-Dialog #validation-message")
    message.wait_for(timeout=VALIDATE * 1000)
    verdict = message.evaluate("e => [...e.classList].find(c => c.startsWith('validation-')) || ''")
    return verdict, message.inner_text().strip()


def show(capsys, text):
    """Prints past pytest's capture, so CI logs show it."""
    with capsys.disabled():
        print(f"\n    {text} ", end="")


def test_validate_reads_the_course_config(course, monkeypatch):
    from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler
    monkeypatch.chdir(course)  # the server's working directory
    config = ValidateAssignmentHandler.load_config(None)  # what the Validate button's handler loads
    assert config.Execute.timeout == 600, "nbgrader_config.py did not load: Validate runs on nbgrader's defaults"


def test_a_right_notebook_runs_top_to_bottom_and_validates(lab, browser, course, capsys):
    with notebook_page(browser, lab, "alice") as page:
        start = time.monotonic()
        run_all_cells(page)
        ran = time.monotonic() - start
        errors = page.locator(ERRORS)
        assert errors.count() == 0, f"alice's notebook shows errors:\n{errors.all_inner_texts()}"
        assert page.locator(f"{PANEL} .jp-OutputArea-output img").count() >= 3, "the photo and its grey versions"
        start = time.monotonic()
        verdict, text = validate(page)
        validated = time.monotonic() - start
        shot = save_screenshot(page, "validate-alice")
    show(capsys, f"alice: Run All {ran:.1f} s, Validate {validated:.1f} s, dialog: {shot}")
    assert (verdict, text) == ("validation-success", SUCCESS), text
    saved = nbformat.read(course / "alice" / NOTEBOOK, as_version=4)  # Validate saved it first
    code = [c for c in saved.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]


def test_a_wrong_answer_fails_validation_with_the_checks_message(lab, browser, capsys):
    with notebook_page(browser, lab, "bob") as page:
        start = time.monotonic()
        verdict, text = validate(page)
        validated = time.monotonic() - start
        shot = save_screenshot(page, "validate-bob")
    show(capsys, f"bob: Validate {validated:.1f} s, dialog: {shot}")
    assert verdict == "validation-failed", text
    assert "The following cell failed:" in text and SUCCESS not in text
    assert 'check_rgb2grey(rgb2grey_py, "photo")' in text, "the failing photo test is named"
    assert "pixels are wrong for the photo" in text and "check the weights" in text, text

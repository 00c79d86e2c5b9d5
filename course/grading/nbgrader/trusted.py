"""The one trusted grading pass: inside nbgrader's autograde, every test cell's verdict comes from the judge.

The notebook's kernel (the worker) runs the student's cells and the cells that set things up, as nbgrader always
did. A test cell does not run there: the judge, which is nbgrader's own process, where no student code runs,
parses the cell's one check call and runs the installed check, asking the kernel only for the student's answer
(a Python function is called there on the judge's inputs, a CUDA source comes back as text and is built and run
by the judge's own child processes, a value comes back as it is). Answers travel as PyTorch's weights-only
format, which holds tensors, numbers, strings and containers and can run no code when read. The verdict becomes
the cell's outputs: what the check printed, or an error with its message. So nbgrader's scores, its feedback and
`course export` all read a verdict no student code could change.

A failed Python check's message is the one the student would read in the notebook: the judge asks the kernel
to run the test cell as written, and keeps that message when it fails too (its hints read the student's kernel
and what the runners did, which only the kernel holds); a kernel that passes what the judge failed gets the
judge's message. A cell with a seed (a hidden test's, made the student's own: grading/nbgrader/seeds.py) is never run
there: the judge sends the check's name, its other arguments and the inputs the seed gave, never the seed.
A check that cannot run for a reason of the grader's (course.device.GraderFault) is no verdict: it stops the
student's grading with the reason.
"""
import ast
import builtins
import contextlib
import io
import queue
import re
import tempfile
import threading
import time
from pathlib import Path

from nbformat.notebooknode import NotebookNode

from ...device import GraderFault
from ...harness import trace
from .autograde import SafeExecute, error_output
from ..cell_roles import check_call, is_demo, is_test_cell
from .seeds import has_seed

OPAQUE = "__course_opaque__"  # what stands for a value that cannot travel: the name of its type


def the_check(name):
    """The installed check a test cell names, and the Answer it judges (harness/rungs.py); ValueError if none."""
    import course
    check = getattr(course, name, None)
    kind = getattr(check, "answer", None)
    if check is None:
        raise ValueError(f"`{name}` is not a check the course exports")
    if kind is None:
        raise ValueError(f"`{name}` does not say what it judges (course.harness.exercise.judges)")
    return check, kind


def _judged_calls(nb):
    """Each test cell of a notebook with its check call as the judge reads it: (the check's Answer, its other arguments,
    its keyword arguments), or the ValueError saying why the judge cannot run it."""
    for cell in nb.cells:
        if is_test_cell(cell):
            try:
                name, _, args, kwargs = check_call(cell.source)
                yield cell, (the_check(name)[1], args, kwargs)
            except ValueError as e:
                yield cell, e


def child_checks(nb):
    """What a notebook's test cells ask of checks whose rung runs the answer in child processes (CUDA's, Triton's):
    (whether any does, the case names those cells pass)."""
    from ...harness.rungs import RUNGS
    kinds = [rung.answer for rung in RUNGS.values() if rung.children]
    calls = [call for _, call in _judged_calls(nb) if not isinstance(call, ValueError) and call[0] in kinds]
    return bool(calls), {a for _, args, kwargs in calls for a in [*args, *kwargs.values()] if isinstance(a, str)}


def unjudgeable(nb):
    """[(grade_id, why)] of a notebook's test cells that the judge cannot run as one check call."""
    return [(cell.metadata["nbgrader"].get("grade_id", "?"), str(call)) for cell, call in _judged_calls(nb)
            if isinstance(call, ValueError)]


DEMO_NOTE = ("(a demo of the lesson, not run at grading: the tests call your code themselves. It ran in your "
             "notebook when you worked through it.)\n")


def _python(source):
    """A cell's source as plain Python (%time's statement kept, other magics and !commands translated), or None if it
    does not parse."""
    from IPython.core.inputtransformer2 import TransformerManager
    source = re.sub(r"^%%time(it)?[^\n]*\n", "", source)
    source = re.sub(r"^(\s*)%time(it)?\s+(-\S+\s+)*", r"\1", source, flags=re.M)
    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None


def needs_demo(nb):
    """[(cell index, names)] of the cells that use a name only a demo cell before them defines: grading skips demos."""
    only_in_demo, out = set(), []
    for i, cell in enumerate(nb.cells):
        tree = _python(cell.source) if cell.cell_type == "code" else None
        if tree is None:
            continue
        stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        stored |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        stored |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
        stored |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                   for a in n.names}
        if is_demo(cell):
            only_in_demo |= stored
            continue
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - stored
        if used & only_in_demo:
            out.append((i, sorted(used & only_in_demo)))
        only_in_demo -= stored
    return out


# ---- what travels between the worker and the judge ----------------------------------------------------------------

def _sendable(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_sendable(v) for v in value) if type(value) in (tuple, list) else tuple(map(_sendable, value))
    if isinstance(value, dict):
        return {str(k): _sendable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str, complex)):
        return value
    return {OPAQUE: type(value).__name__}


def encode(reply):
    """A reply as bytes in PyTorch's format, every value one that the weights-only reader accepts."""
    import torch
    buf = io.BytesIO()
    torch.save(_sendable(reply), buf)
    return buf.getvalue()


def _rebuilt(value):
    if isinstance(value, dict) and set(value) == {OPAQUE}:
        return type(str(value[OPAQUE]), (), {"__repr__": lambda self: f"<{type(self).__name__}>"})()
    if isinstance(value, (tuple, list)):
        return type(value)(_rebuilt(v) for v in value)
    if isinstance(value, dict):
        return {k: _rebuilt(v) for k, v in value.items()}
    return value


def decode(data):
    """A reply from the worker, read with PyTorch's weights-only reader: no code of the student's runs here."""
    import torch
    return _rebuilt(torch.load(io.BytesIO(data), weights_only=True))


def answer(ns, what, arg):
    """The worker's side of one request of the judge, on the notebook's names ns: ("value", v), ("returned", output,
    inputs after, {shared memory use, the threads each launch ran alone (ladder.py's contract)}), ("timeout", hint),
    ("passed", took the inputs) for a "message" request, or ("raised", type name, message)."""
    from course import ladder
    from course.harness import python
    try:
        if what == "value":
            return ("value", ns[arg])
        if what == "collect":  # a rung's own function of the notebook's value (harness/rungs.py): plain data back
            from course.harness.rungs import imported
            path, name = arg
            return ("value", imported(path)(ns[name]))
        if what == "cuda_src":  # the name a CUDA check was given: a source, or the module built from cuda_src
            value = ns.get(arg)
            return ("value", value if isinstance(value, str) else ns.get("cuda_src"))
        if what == "message":  # a failed seeded check run again here on the judge's inputs, for its message
            return _message_here(ns, *arg)
        name, args, order = arg
        try:  # in the order of a block's threads the judge asks for
            with ladder.recording(order["reversed"], order.get("alone")) as ran, python.time_limit(python.PYTHON_TIMEOUT), \
                    python.prefilled(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                value = ns[name](*args)
        except python.TimedOut as e:
            from course.harness.evidence import timeout_hint
            return ("timeout", timeout_hint(e.__traceback__, ran, python.PYTHON_TIMEOUT))
        return ("returned", value, args, {key: ran[key] for key in ("writes", "syncs", "contract")})
    except BaseException as e:  # noqa: B902 (the student's code raised: tell the judge what)
        return ("raised", type(e).__name__, str(e))


def _message_here(ns, check, target, args, kwargs, cases):
    """The worker's side of a "message" request: the course's check run on the inputs the judge gave (where, args),
    without the seed that chose them: ("raised", type name, message) or ("passed", whether it took the inputs)."""
    import course
    from course.harness import python
    from course.harness.exercise import Case
    with python.inputs_given([Case(where, tuple(a)) for where, a in cases]) as given, \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            getattr(course, check)(ns[target], *args, **kwargs)
        except BaseException as e:  # noqa: B902 (the message is the point)
            return ("raised", type(e).__name__, str(e)) if given["used"] else ("passed", False)
    return ("passed", given["used"])


def read_request(request):
    """A judge's request as the kernel reads it: (what, arg)."""
    import torch
    from course.timing import AsyncWork, SlowFirstCall
    # written by the judge: plain data, read as such, and the course's stand-ins for a launch that a timer case hands
    # the student's timer (drill 4: without them every timer test of a right answer failed in the sandboxed kernel)
    with torch.serialization.safe_globals([AsyncWork, SlowFirstCall]):
        return torch.load(request, weights_only=True)


def serve(request, reply):
    """Run in the notebook's kernel by the judge: answers the request in one file, the reply in another."""
    from IPython import get_ipython
    what, arg = read_request(request)
    Path(reply).write_bytes(encode(answer(get_ipython().user_ns, what, arg)))


class Answers:
    """The judge's view of the student's names; ask(what, arg) gets one reply (subclasses say from where)."""

    cells = None  # the notebook's code cells before the test cell, as text, where the judge holds them

    def ask(self, what, arg):
        raise NotImplementedError

    def value(self, what, arg):
        """The value a "value" or "cuda_src" request returns; what the student's code raised, raised here."""
        reply = self.ask(what, arg)
        if reply[0] == "raised":
            raise _raised(reply)
        return reply[1]

    def function(self, name):
        """A stand-in for the student's function `name` that calls it in the worker."""
        worker = self

        def call(*args):
            from course import ladder
            record = ladder.record()
            reply = worker.ask("call", (name, args, {"reversed": record["reversed"], "alone": record["alone"]}))
            if reply[0] == "raised":
                raise _raised(reply)
            if reply[0] == "timeout":
                from course.harness.limit import TimedOut
                stop = TimedOut()
                stop.hint = reply[1]
                raise stop
            _, value, after, used = reply
            for mine, theirs in zip(args, after):  # an input the function changed, changed here too
                if hasattr(mine, "copy_") and hasattr(theirs, "shape") and mine.shape == theirs.shape:
                    mine.copy_(theirs)
            for key, more in used.items():  # what the kernel did with shared memory, and its threads run alone: evidence
                record[key] += more           # from the student's process, which may fail an answer, never pass one
            return value
        call.__name__ = name
        call.source_text = self.cells  # what a check reads of the answer's source: the notebook's text, not the kernel's
        return call


def _raised(reply):
    """An exception like the one the student's code raised (its type's name and message; nothing of theirs runs)."""
    _, name, message = reply
    builtin = getattr(builtins, str(name), None)
    if isinstance(builtin, type) and issubclass(builtin, Exception):  # IndexError stays IndexError: checks ask
        try:
            return builtin(message)
        except Exception:  # a builtin that takes other arguments (UnicodeDecodeError): its name is enough
            pass
    return type(str(name), (Exception,), {})(message)


def judge_cell(answers, source):
    """Runs a test cell's check here, from the installed package, on the student's answer got through answers; returns
    what the check returns (a speed test's Score, harness/speed.py)."""
    check_name, target, args, kwargs = check_call(source)
    check, kind = the_check(check_name)  # the installed check, never the notebook's
    return check(kind.collect(answers, target), *args, **kwargs)


SPEED_RECORD = "course_speed"  # the key of a speed test's figures in its cell's result's metadata (grading/reports/leaderboard.py)


def scored(score, points):
    """A speed test's cell result: its points as the value nbgrader reads as partial credit, the figures as metadata."""
    earned = round(score.fraction * float(points), 2)
    return NotebookNode(output_type="execute_result", execution_count=None, data={"text/plain": f"{earned:g}"},
                        metadata={SPEED_RECORD: dict(score.record, points=earned, max_points=float(points))})


# ---- inside nbgrader: the execute step ------------------------------------------------------------------------

class _Stopped(Exception):
    """The notebook's kernel died or stopped answering while the judge asked it something."""


class _KernelAnswers(Answers):
    """Answers from the notebook's kernel: each request is handed to the thread that drives the kernel."""

    def __init__(self, requests, replies, cells=None):
        self.requests, self.replies, self.cells = requests, replies, cells

    def ask(self, what, arg):
        self.requests.put((what, arg))
        ok, reply = self.replies.get()
        if not ok:
            raise reply
        return reply


class TrustedExecute(SafeExecute):
    """SafeExecute whose test cells are judged by the judge (this process), never run by the student's kernel."""

    def preprocess(self, nb, resources=None, km=None):
        from ...harness.children import prepare_children
        found, cases = child_checks(nb)
        if found:
            prepare_children(cases)  # their GPU contexts are made while the notebook's first cells run
        self._judged = 0
        nb, resources = super().preprocess(nb, resources, km)
        nb.metadata.setdefault("course", {})["judged"] = f"trusted: {self._judged} test cells judged outside the kernel"
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if is_demo(cell) and not self._stopped:  # release made sure no later cell needs what it defines
            cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=DEMO_NOTE)]
            return cell, resources
        if not is_test_cell(cell) or self._stopped:
            return super().preprocess_cell(cell, resources, index)
        start = time.perf_counter()
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        trace.mark("cell judged", grade_id)
        kind, error, printed, score = self._judge(cell, index)
        trace.mark("cell done", grade_id)
        cell.metadata.setdefault("course", {})["judge_seconds"] = round(time.perf_counter() - start, 3)
        self._judged += 1
        if self._stopped:
            cell.outputs = [self._stopped_output()]
        elif error is None:
            cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=printed)] if printed else []
            if hasattr(score, "fraction"):  # a speed test: its share of the cell's points (nbgrader's partial credit)
                cell.outputs.append(scored(score, cell.metadata["nbgrader"]["points"]))
        else:
            cell.outputs = self._message(cell, resources, index, kind, error, printed, self._cases)
        cell.execution_count = index + 1
        self._ran_all = index == self._last
        self.nb.cells[index] = cell  # nbclient puts each cell it executes there: the kernel's requests were too
        return cell, resources

    def _message(self, cell, resources, index, kind, error, printed, cases=()):
        """The failed cell's outputs: the notebook's own message for a Python check that fails there too, else the
        judge's. A seeded cell is not run there: its check runs on the inputs it judged (cases), without the seed."""
        judged = ([NotebookNode(output_type="stream", name="stdout", text=printed)] if printed else []) + [
            error_output(type(error).__name__, str(error))]
        if kind is None or not kind.kernel_message:
            return judged
        if has_seed(cell.source):
            return self._seeded_message(cell, index, judged, cases)
        shown = NotebookNode(cell)
        shown.outputs = []
        shown, _ = super().preprocess_cell(shown, resources, index)
        if self._stopped:  # the verdict stands; the cells after this one get none (SafeExecute)
            return judged
        # the kernel's words for the judge's verdict: an error of another kind (a name the notebook lacks) is not that
        return shown.outputs if any(o.output_type == "error" and o.ename == type(error).__name__
                                    for o in shown.outputs) else judged

    def _seeded_message(self, cell, index, judged, cases):
        """A failed seeded cell's message from its check run in the kernel on the judge's inputs; the judge's own when
        that run passes, takes no inputs, or cannot be asked."""
        check, target, args, kwargs = check_call(cell.source)
        kwargs = {k: v for k, v in kwargs.items() if k != "seed"}
        try:
            reply = self._ask_kernel(("message", (check, target, args, kwargs, [(c.where, c.args) for c in cases])),
                                     index)
        except Exception:  # the verdict stands; a kernel that cannot word it gets the judge's words
            return judged
        if self._stopped or reply[0] != "raised":
            return judged
        return [error_output(str(reply[1]), str(reply[2]))]

    def _judge(self, cell, index):
        """(the Answer judged, the check's error or None, what it printed, what it returned): judge_cell in a thread of
        this process, while this thread runs each request in the kernel."""
        requests, replies, done = queue.Queue(), queue.Queue(), {}
        cells = [c.source for c in self.nb.cells[:index] if c.cell_type == "code" and not is_test_cell(c)
                 and not is_demo(c)]

        def judge():
            from ...harness.python import inputs_seen
            printed = io.StringIO()
            try:
                done["kind"] = the_check(check_call(cell.source)[0])[1]
                with contextlib.redirect_stdout(printed), inputs_seen() as done["cases"]:
                    done["score"] = judge_cell(_KernelAnswers(requests, replies, cells), cell.source)
            except BaseException as e:  # noqa: B902 (the verdict: a failed check, or the kernel gone)
                done["error"] = e
            done["printed"] = printed.getvalue()
            requests.put(None)

        thread = threading.Thread(target=judge, name="course-judge", daemon=True)
        thread.start()
        while (request := requests.get()) is not None:
            try:
                replies.put((True, self._ask_kernel(request, index)))
            except BaseException as e:  # noqa: B902
                replies.put((False, e))
        thread.join()
        error = done.get("error")
        if isinstance(error, GraderFault):  # no verdict on the answer: the student's grading stops with the reason
            raise error
        self._cases = done.get("cases") or []
        return (done.get("kind"), None if isinstance(error, _Stopped) else error, done.get("printed", ""),
                done.get("score"))

    def _ask_kernel(self, request, index):
        import torch
        if self._stopped:
            raise _Stopped(self._stopped)
        trace.mark("ask", request[0])
        # in the folder the kernel's sandbox may write (course/grading/nbgrader/autograde.py's SandboxedKernelManager)
        with tempfile.TemporaryDirectory(prefix="course-judge-", dir=getattr(self.km, "exchange", None)) as tmp:
            asked, answered = Path(tmp) / "request.pt", Path(tmp) / "reply.pt"
            torch.save(request, asked)
            hidden = NotebookNode(cell_type="code", metadata={}, outputs=[], source=(
                f"__import__('course.grading.nbgrader.trusted', fromlist=['serve']).serve({str(asked)!r}, {str(answered)!r})"))
            try:
                self.execute_cell(hidden, index, store_history=False)
            except Exception as e:
                self._stop_as_died(e, index)
                raise _Stopped(self._stopped) from None
            if self._stop_if_timed_out(hidden, index):
                raise _Stopped(self._stopped)
            if not answered.exists():
                why = next((f"{o.ename}: {o.evalue}" for o in hidden.outputs if o.output_type == "error"), "no reply")
                raise RuntimeError(f"the notebook's kernel could not answer the check ({why})")
            reply = decode(answered.read_bytes())
        trace.mark("answered", request[0])
        return reply

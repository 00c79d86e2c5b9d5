"""Which names a failed notebook cell left as they were, so that a check refuses to judge what that cell no longer says.

A cell that defined rgb2grey_triton and worked, then failed on its next run (a syntax error typed into it, an error
before its `def`), leaves the old rgb2grey_triton in the notebook: a check would judge code the student can no
longer see. In IPython the course watches each cell's run (its pre_run_cell and post_run_cell events): before a cell
runs it notes which objects the top-level names the cell defines (def, class, assignment) are bound to; after a run
that failed, a name still bound to the same object is stale, until a cell that binds it runs without error.
Outside IPython (a check in a script, the trusted judge's process) nothing is watched and nothing is refused.
"""
import ast
import re
import sys
import types

_DEFINES = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)"  # def f(, class C
                      r"|^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?::[^=\n]*)?=(?!=)", re.M)  # a, b = / x: int =


def defined_names(text):
    """The names a cell's text binds at its top level: functions, classes, assignment targets (read with a regular
    expression where the text is not valid Python, as after a typo)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {n.strip() for m in _DEFINES.finditer(text) for n in (m.group(1) or m.group(2)).split(",")}
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


_UNBOUND = object()
_PLAIN = (bool, int, float, complex, type(None))


class Watch:
    """A notebook's cell runs as they bear on its names: what each cell is about to (re)define, and the names a failed
    run left bound to the objects they had before it (stale: name -> the execution count of that run)."""

    def __init__(self, shell):
        self.shell, self.before, self.stale = shell, {}, {}

    def pre_run_cell(self, info=None):
        raw = getattr(info, "raw_cell", None)
        if raw is None:
            self.before = {}
            return
        try:
            text = self.shell.transform_cell(raw)  # %time lines and other magics as Python
        except Exception:  # noqa: BLE001 (a cell IPython cannot transform: read it as written)
            text = raw
        ns = self.shell.user_ns
        self.before = {name: ns.get(name, _UNBOUND) for name in defined_names(text)}

    def post_run_cell(self, result=None):
        ns = self.shell.user_ns
        failed = result is not None and not result.success
        for name, was in self.before.items():
            # a number or None bound again to an equal value is the same object: nothing says the run missed it
            if failed and was is not _UNBOUND and ns.get(name, _UNBOUND) is was and not isinstance(was, _PLAIN):
                self.stale[name] = result.execution_count
            else:
                self.stale.pop(name, None)
        self.before = {}

    def stale_names(self, answer):
        """The stale names an answer is bound to in the notebook (or, for a function, that it uses), with the run that
        left each one: [(name, execution count)]."""
        ns = self.shell.user_ns
        names = {n for n in self.stale if ns.get(n) is answer}
        if isinstance(answer, types.FunctionType):
            names |= {n for n in _used(answer.__code__) if n in self.stale}
        return sorted((n, self.stale[n]) for n in names)


def _used(code):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _used(const)


_watch = None


def watch(shell=None):
    """Starts watching the cells of the IPython session this runs in (once); the Watch, or None outside IPython."""
    global _watch
    if _watch is not None:
        return _watch
    if shell is None:
        ipython = sys.modules.get("IPython")  # imported only where IPython already runs
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "events"):
        return None
    _watch = Watch(shell)
    shell.events.register("pre_run_cell", _watch.pre_run_cell)
    shell.events.register("post_run_cell", _watch.post_run_cell)
    return _watch


def refuse_stale(check, answer):
    """Raises AssertionError, naming the cell's failed run, when the answer a check was given is what a failed cell
    left behind rather than what that cell now defines."""
    if _watch is None:
        return
    found = _watch.stale_names(answer)
    if not found:
        return
    name, run = found[0]
    raise AssertionError(
        f"{check}: the cell that defines {name} failed when it last ran (In [{run}]), so {name} is still the one from "
        f"its run before that, which is not the code the cell holds now: the check does not judge it.\n"
        f"Hint: fix the error that cell shows and run it again (then this check).")


watch()  # the course is imported in a notebook's first cell: the cells after it are watched

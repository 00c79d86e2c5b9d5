"""Compiles ahead: every load_cuda call a notebook makes with sources written out in it, built on all cores before grading.

The sources are read from the notebook without running it (string literals, `cuda_begin + r\"\"\"...\"\"\"`,
names assigned from them), so nothing a student wrote runs here but their C++ in the compiler.
load_cuda names each build after a hash of what it is made of and keeps it, so the notebook's own
load_cuda cell (and each check) then finds the module built: a source compiled once is never compiled again,
whichever student, process or run needs it next.
"""
import ast
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from ..cell_roles import cell_code

UNKNOWN = object()  # what written_value gives for an expression not written out in the notebook


def written_value(node, env):
    """The value of an expression made of literals (strings, ints, bools, lists of them), names of env and + of
    strings; UNKNOWN for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool, int)):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id, UNKNOWN)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = written_value(node.left, env), written_value(node.right, env)
        return a + b if isinstance(a, str) and isinstance(b, str) else UNKNOWN
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [written_value(e, env) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else list(items)
    return UNKNOWN


def _python(source):
    """A cell's source as plain Python (IPython's %magics turned into calls), or None when it does not parse."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: B902 (no IPython, or a cell it cannot read: try the text as it is)
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def statements(cells, env):
    """(index, statement) for each top-level statement of the code cells, in order, (index, None) for a cell that does
    not parse; env, the names bound so far to strings written out (as written_value reads them), is kept up to date:
    when a statement is yielded it holds what the statements before it bound."""
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        tree = _python(cell_code(cell))
        if tree is None:
            yield i, None
            continue
        for stmt in tree.body:
            yield i, stmt
            value, direct = UNKNOWN, set()
            if isinstance(stmt, ast.Assign):
                value, direct = written_value(stmt.value, env), {t.id for t in stmt.targets if isinstance(t, ast.Name)}
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and isinstance(stmt.target, ast.Name):
                value = written_value(ast.BinOp(ast.Name(stmt.target.id, ast.Load()), ast.Add(), stmt.value), env)
                direct = {stmt.target.id}
            for name in _binds(stmt):  # a name bound any other way is no longer known
                if name in direct and isinstance(value, str):
                    env[name] = value
                else:
                    env.pop(name, None)


def _binds(stmt):
    """The names a top-level statement binds other than by importing (`from course import cuda_begin` keeps the
    course's value), not counting those local to a function it defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def compile_jobs(nb, cuda_begin=None, gpu=True):
    """[{cuda_src, cpp_src, funcs, opt}] for each load_cuda call of notebook nb whose arguments are written out in it.

    gpu=False leaves out cells tagged `gpu` (they stop before compiling where there is no GPU)."""
    if cuda_begin is None:
        from ...prelude import cuda_begin
    env, jobs = {"cuda_begin": cuda_begin}, []
    cells = [c for c in nb.cells if gpu or "gpu" not in c.metadata.get("tags", [])]
    for _, stmt in statements(cells, env):
        for node in ast.walk(stmt) if stmt is not None else ():
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "load_cuda":
                args = [written_value(a, env) for a in node.args[:4]]
                kw = {k.arg: written_value(k.value, env) for k in node.keywords}
                names = ["cuda_src", "cpp_src", "funcs", "opt"]
                call = dict(zip(names, args), **{k: v for k, v in kw.items() if k in names})
                call.setdefault("opt", False)
                if len(call) == 4 and not any(v is UNKNOWN for v in call.values()) \
                        and isinstance(call["cuda_src"], str) and isinstance(call["cpp_src"], str):
                    call["funcs"] = [call["funcs"]] if isinstance(call["funcs"], str) else call["funcs"]
                    jobs.append(call)
    return jobs


def job_key(job):
    """What makes two jobs the same build: their sources, functions and options."""
    return json.dumps([job["cuda_src"], job["cpp_src"], job["funcs"], bool(job["opt"])])


def unique(jobs):
    """The jobs without repeats (the same sources and options)."""
    seen, out = set(), []
    for j in jobs:
        key = job_key(j)
        if key not in seen:
            seen.add(key)
            out.append(j)
    return out


def build_all(jobs, processes=None, timeout=1800, env=None):
    """Builds the jobs in `processes` fresh processes at once; [(job, None or the compiler's error)] in the jobs' order."""
    jobs = unique(jobs)
    if not jobs:
        return []
    processes = max(1, min(len(jobs), processes or max(1, (os.cpu_count() or 2) // 2)))
    batches = [jobs[i::processes] for i in range(processes)]

    def run(batch):
        try:
            proc = subprocess.run([sys.executable, "-m", "course.grading.run.compile"], input=json.dumps(batch),
                                  capture_output=True, text=True, timeout=timeout, env=env)
            lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        except subprocess.TimeoutExpired:
            lines = []
        errors = [line.get("error") for line in lines] + ["the build did not finish"] * (len(batch) - len(lines))
        return list(zip(batch, errors))

    with ThreadPoolExecutor(processes) as pool:
        results = [r for rs in pool.map(run, batches) for r in rs]
    order = {id(j): i for i, j in enumerate(jobs)}
    return sorted(results, key=lambda r: order[id(r[0])])


def _build(job):
    """load_cuda on a job: None, or why it failed."""
    from course.toolchain import CompileError, load_cuda
    try:
        load_cuda(job["cuda_src"], job["cpp_src"], job["funcs"], opt=bool(job["opt"]))
        return None
    except CompileError as e:
        return str(e)
    except Exception as e:  # noqa: B902 (a module that builds but does not load: the notebook will say so)
        return f"{type(e).__name__}: {e}"


def _sandboxed_build(job):
    """_build in a forked child in a sandbox (course/sandbox.py): importing the module runs the student's static
    initializers, which must not run with the grader's rights."""
    from course import sandbox
    folder = sandbox.new_folder("course-compile-")
    out = folder / "io" / "error.json"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the parent's report is its stdout: nothing else goes there
            sandbox.enter_build(folder)
            out.write_text(json.dumps(_build(job)))
            code = 0
        finally:
            os._exit(code)
    os.waitpid(pid, 0)
    copied = folder / "error.copied"
    error = json.loads(copied.read_text()) if sandbox.copy_out(out, copied) else "the build stopped without a report"
    sandbox.end(folder)
    return error


def _serve():
    """The build process: load_cuda for each job read from stdin (each in a sandboxed child); one JSON line per job on
    stdout."""
    import warnings
    warnings.simplefilter("ignore")
    from course import sandbox
    import course.toolchain  # noqa: F401 (imported once, before the children fork)
    for job in json.loads(sys.stdin.read()):
        t = time.perf_counter()
        error = _sandboxed_build(job) if sandbox.wanted() else _build(job)
        if not isinstance(error, (str, type(None))):
            error = "the build's report was not a message"
        print(json.dumps({"error": error, "seconds": time.perf_counter() - t}), flush=True)


if __name__ == "__main__":
    _serve()

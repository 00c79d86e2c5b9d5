"""What a notebook's cell is to grading: a test cell and its one check call, a solution cell, a demo.

A leaf: it imports nothing of the course, so the declaration (course/assignments.py), the judge (grading/nbgrader/trusted.py)
and the commands all read cells the same way without importing each other."""
import ast


def cell_code(cell):
    """A cell's source as one string (nbformat's JSON may hold it as a list of lines)."""
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def is_test_cell(cell):
    """True for an autograded test cell (graded, not a solution)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and meta.get("grade", False) and not meta.get("solution", False)


def is_demo(cell):
    """Whether a code cell is tagged `demo`: it shows a student's work and grading skips it, as the audit does."""
    return cell.get("cell_type") == "code" and "demo" in cell.get("metadata", {}).get("tags", [])


def solution_ids(nb):
    """The grade_ids of a notebook's solution cells (nbformat or JSON dict)."""
    return [c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]
            if c.get("metadata", {}).get("nbgrader", {}).get("solution")]


def check_call(source):
    """The one check call of a test cell: (check name, first argument's name, other arguments, keyword arguments).

    Raises ValueError saying why a cell is not one call check_...(name, literal, ...)."""
    try:
        body = ast.parse(source).body
    except SyntaxError as e:
        raise ValueError(f"it is not valid Python ({e.msg}, line {e.lineno})") from None
    calls = [node.value for node in body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]
    others = [node for node in body if not (isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Constant)))
              and not isinstance(node, ast.Pass)]
    if len(calls) != 1 or others:
        raise ValueError(f"a test cell holds exactly one call check_...(name, ...) (and a docstring); this one has "
                         f"{len(calls)} call(s) and {len(others)} other statement(s)")
    call = calls[0]
    if not isinstance(call.func, ast.Name) or not call.args or not isinstance(call.args[0], ast.Name):
        raise ValueError("its call must be check_...(name, ...): a check of the course called on a name")
    try:
        args = [ast.literal_eval(a) for a in call.args[1:]]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except ValueError:
        raise ValueError("the check's other arguments must be literals (a case name, a seed)") from None
    return call.func.id, call.args[0].id, args, kwargs

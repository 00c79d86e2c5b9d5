"""What a student's kernel source and a failed run show, so that a hint names the real cause or says it cannot.

guard_hint(cuda_src)           the memory check's hint, from the guards of the CUDA kernel (for harness/cuda.py)
python_guards(kernel, params)  the guards of a Python kernel, read from its source
index_hint(kernel, ...)        the hint for an index past a tensor's end in a Python kernel (ladder.py)
timeout_hint(tb, ran)          the hint for a Python rung stopped at its time limit (python.py)
runner_hint(ran, n)            what the runners saw: no thread, too few threads, kernels returning values (python.py)
tf32_dots(text)                the tl.dot calls of a Triton answer that leave TF32 on (topics/matmul.py)
loads_without_other(text)      a Triton answer's masked tile loads with no other= (topics/matmul.py)
triton_error_hint(text, error) what a Triton answer's source says of an error its launch raised (harness/triton.py)
triton_output_hint(text)       what it says of wrong output elements: a program id the grid has no axis for

Every hint here is read from evidence (the source, the values in the failing thread, what the runners did); where
the evidence does not single out a cause, the hint lists the ones it allows instead of guessing.
"""
import ast
import inspect
import linecache
import operator
import re
import textwrap
import traceback
from dataclasses import dataclass

# ---- CUDA C: the guards of the kernels in a cuda_src --------------------------------------------------------

_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _strip_comments(src):
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", src, flags=re.S)


def _balanced(text, start, open_="(", close=")"):
    """The text between text[start] (an opening bracket) and its matching close, and the index after the close."""
    depth = 0
    for j in range(start, len(text)):
        depth += text[j] == open_
        depth -= text[j] == close
        if depth == 0:
            return text[start + 1:j], j + 1
    return text[start + 1:], len(text)


def cuda_kernels(cuda_src):
    """{name: body} of the __global__ functions in cuda_src (comments removed)."""
    return {name: body for name, (_, body) in _kernels(cuda_src).items()}


def _kernels(cuda_src):
    """{name: (parameter list, body)} of the __global__ functions in cuda_src (comments removed)."""
    code = _strip_comments(cuda_src)
    out = {}
    for m in re.finditer(r"__global__\s+void\s+(\w+)\s*\(", code):
        params, after = _balanced(code, m.end() - 1)
        brace = code.find("{", after)
        if brace >= 0:
            out[m.group(1)] = (params, _balanced(code, brace, "{", "}")[0])
    return out


_INT = r"\b(?:(?:const|unsigned|signed)\s+)*(?:int|long(?:\s+long)?|size_t|int64_t|int32_t|uint32_t|auto)\s+"


def _sizes(params, body):
    """The kernel's integer parameters and locals that are no thread index: the sizes a guard compares with,
    e.g. ["rows", "cols"] of `(const float* x, float* out, int rows, int cols)`."""
    names = re.findall(rf"{_INT}(\w+)\s*(?:,|$)", params.strip() + ",") if params else []
    axes = _index_axes(body)
    loops = set(re.findall(rf"\bfor\s*\(\s*{_INT}(\w+)", body))
    names += [m.group(1) for m in re.finditer(rf"{_INT}(\w+)\s*=(?!=)([^;,]*)", body)
              if m.group(1) not in {*axes, *loops} and not re.search(r"\b(?:blockDim|gridDim)\b", m.group(2))
              and not loops & set(re.findall(r"\w+", m.group(2)))]  # `int idx = ph*tw;` is an offset
    return list(dict.fromkeys(names))


_ROWS = ("h", "rows", "height", "nrows", "n_rows", "num_rows", "H")
_COLS = ("w", "cols", "width", "ncols", "n_cols", "num_cols", "W")


def _bound_of(sizes):
    """The size a 1D index must stay below, read from the kernel's sizes (n, the only one, or a row count);
    None where they do not say."""
    if "n" in sizes:
        return "n"
    if len(sizes) == 1:
        return sizes[0]
    return next((v for v in sizes if v in _ROWS), None)


def _below(var, sizes):
    """`if (var < bound)` with the kernel's own bound, or in words where its sizes do not name one."""
    bound = _bound_of(sizes)
    return f"`if ({var} < {bound})`" if bound else f"`if ({var} < n)`, n being the count {var} must stay below"


@dataclass
class CGuard:
    """One comparison of an index with a bound in a CUDA kernel's `if`, loop or early return."""
    var: str
    text: str          # the statement that tests it, e.g. `if (i < n)`, `if (i >= n) return;`
    off_by_one: bool   # lets var == bound through: `i <= n`, `if (i > n) return;`
    at: int            # where the condition starts in the kernel's body
    bound: str = "n"   # what it compares var with, as written


def _index_vars(body):
    """The kernel's own thread indices: variables assigned from threadIdx/blockIdx (`int i = blockIdx.x*...;`)."""
    return list(_index_axes(body))


def _index_axes(body):
    """{name: "x", "y" or None} of the variables assigned from threadIdx/blockIdx, with the axis they read.

    `int tc = threadIdx.x, tr = threadIdx.y;` declares two; an integer declared from one of them is one too
    (`for (int j = tid; j < w; j += blockDim.x)`), with its axis."""
    found = {}
    for m in re.finditer(r"\b(\w+)\s*=(?!=)\s*([^;,]*)", body):
        axes = set(re.findall(r"\b(?:threadIdx|blockIdx)\.([xyz])", m.group(2)))
        if axes and m.group(1) not in found:
            found[m.group(1)] = axes.pop() if len(axes) == 1 else None
    for m in re.finditer(rf"{_INT}(\w+)\s*=(?!=)\s*([^;,]*)", body):
        from_ = [found[v] for v in re.findall(r"\b\w+\b", m.group(2)) if v in found]
        if from_ and "[" not in m.group(2) and m.group(1) not in found:
            found[m.group(1)] = from_[0] if len(set(from_)) == 1 else None
    return found


def _global_indices(body, axes):
    """The index variables that count threads across the grid: from blockIdx and a thread's index
    (`i = blockIdx.x*blockDim.x + threadIdx.x`). The grid rounds them up past the end; `row = blockIdx.x` alone
    is as many as the launch has blocks."""
    found = set()
    for v in axes:
        m = re.search(rf"\b{v}\s*=(?!=)([^;,]*)", body)
        if m and re.search(r"\bblockIdx\b", m.group(1)) and (re.search(r"\bthreadIdx\b", m.group(1)) or any(
                re.search(rf"\b{u}\b", m.group(1)) for u in axes if u != v)):
            found.add(v)
    return found


def _row_col(axes, block_only=None):
    """(row, col): the index names taken from .y and from .x (those from blockIdx when block_only holds them), or None."""
    pick = [v for v in axes if block_only is None or v in block_only]
    row = next((v for v in pick if axes[v] == "y"), None)
    col = next((v for v in pick if axes[v] == "x"), None)
    return (row, col) if row and col else None


def _conditions(body):
    """(condition, is_early_return, where, as shown) for each if, while and for condition of a kernel body."""
    out = []
    for m in re.finditer(r"\b(if|while|for)\s*\(", body):
        inside, after = _balanced(body, m.end() - 1)
        if m.group(1) == "for":
            parts = inside.split(";")
            if len(parts) == 3:
                out.append((parts[1], False, m.start(), f"for (...; {' '.join(parts[1].split())}; ...)"))
            continue
        rest = body[after:].lstrip()
        early = bool(re.match(r"(\{\s*)?return\b", rest))
        shown = " ".join(inside.split())
        out.append((inside, early, m.start(), f"if ({shown}) return;" if early else f"{m.group(1)} ({shown})"))
    return out


def cuda_guards(body, index_vars):
    """The CGuards of a kernel body: each comparison of one of index_vars with a bound."""
    guards = []
    for cond, early, at, shown in _conditions(body):
        for var in index_vars:
            var_first = rf"(?<![\w.])({var})\s*(<=|>=|<|>)\s*([^&|;?]+)"
            var_last = rf"([^&|;?(]+?)\s*(<=|>=|<|>)\s*({var})\b(?!\s*\[)"
            for m in re.finditer(f"{var_first}|{var_last}", cond):
                if m.group(1):
                    op, bound = m.group(2), m.group(3).strip()
                else:  # `n > i`: the same as `i < n`
                    op, bound = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}[m.group(5)], m.group(4).strip()
                minus_one = bool(re.search(r"-\s*1\s*\)*\s*$", bound))
                if early:   # `if (i >= n) return;` lets i < n on; `if (i > n) return;` lets i == n on too
                    ok, off = op == ">=" or (op == ">" and minus_one), op == ">" and not minus_one
                else:       # `if (i < n) {...}`, `for (...; i < n; ...)`
                    ok, off = op == "<" or (op == "<=" and minus_one), op == "<=" and not minus_one
                if ok or off:
                    guards.append(CGuard(var, shown, off, at, re.sub(r"^\(+|\)+$", "", bound).strip() or "n"))
    return guards


def guard_hint(cuda_src):
    """The memory check's hint for this source: no guard, a guard that lets i == n through, an access before the
    guard, or a guard that is right (then an offset or a size is wrong), in the kernel's own names. Reads the
    kernels' source only."""
    kernels = _kernels(cuda_src) if isinstance(cuda_src, str) else {}
    if not kernels:
        return ("a thread past the last element must do nothing: guard the kernel's body with `if (i < n)`, and "
                "keep every index inside its tensor.")
    for name, (params, body) in kernels.items():
        axes = _index_axes(body)
        index, sizes = list(axes), _sizes(params, body)
        guards = cuda_guards(body, index)
        load = _unbounded_tile_load(body)
        if load:
            return _load_hint(load, name, body)
        global_ = _global_indices(body, axes)
        two_d = _row_col(axes, global_)
        rows = next((v for v in sizes if v in _ROWS), "h")
        cols = next((v for v in sizes if v in _COLS), "w")
        bound = f"`if ({two_d[0]} < {rows} && {two_d[1]} < {cols})`" if two_d else None
        loose = [g for g in guards if g.off_by_one]
        if loose:
            g = loose[0]
            return (f"your guard `{g.text}` in {name} lets {g.var} == {g.bound} through: that thread reads and "
                    f"writes one element past the end. Compare with < (`if ({g.var} < {g.bound})`), or return when "
                    f"{g.var} >= {g.bound}.")
        counted = [v for v in index if v in global_]
        if counted and not guards:
            v = counted[0]
            inside = bound or f"{_below(v, sizes)} (or start with `if ({v} >= {_bound_of(sizes) or 'n'}) return;`)"
            return (f"{name} has no guard: the grid is rounded up to whole blocks, so the last block's threads past "
                    f"the end read and write outside the tensors. Put the body inside {inside}.")
        unguarded = [v for v in counted if v not in {g.var for g in guards} and _indexes_with(body, v)]
        if unguarded and guards:
            return (f"{name} guards {', '.join(sorted({g.var for g in guards}))} but not {', '.join(unguarded)}, "
                    f"which it also indexes with: every index a thread uses needs its bound, e.g. "
                    f"{bound or _below(unguarded[0], sizes)}.")
        first_guard = min((g.at for g in guards), default=None)
        for g in guards:
            use = re.search(rf"\w+\s*\[[^\]]*\b{g.var}\b[^\]]*\]", body)
            if use and first_guard is not None and use.start() < first_guard and not _in_for_header(body, use.start()):
                return (f"{name} uses `{' '.join(use.group(0).split())}` before its guard: the threads past the end "
                        f"do that too. Move every access inside the guard (after `if ({g.var} >= {g.bound}) "
                        "return;`).")
        uses = list(dict.fromkeys(" ".join(u.split()) for u in re.findall(r"\w+\s*\[[^\]]+\]",
                                                                          re.sub(r"__shared__[^;]*", " ", body))))
        shown = ", ".join(uses[:6]) + (", ..." if len(uses) > 6 else "")
        named = f" ({', '.join(sizes)})" if sizes else ""
        if guards:
            conds = "`, `".join(dict.fromkeys(g.text for g in guards))
            return (f"the guard of {name} is there (`{conds}`), so an index it lets through goes past a tensor's end: "
                    f"check that it compares each index with the right size{named}, and every offset you add in "
                    f"{shown}: for each thread the guard lets on, each must stay below its tensor's size.")
        if not index or not uses:
            continue
        return (f"{name} reads or writes past a tensor's end: its indices come from blockIdx or threadIdx alone, so "
                f"check that the launch starts no more blocks and threads than there is data, and that every index "
                f"in {shown} stays below its tensor's size{named} for every thread it starts.")
    return ("a thread past the last element must do nothing: guard the kernel's body with `if (i < n)`, and keep "
            "every index inside its tensor.")


def _identity(body):
    """(what to load where a shared-memory load is out of range, why, as C) from the kernel's own combining step:
    0 for a sum (of products), -INFINITY for a max, INFINITY for a min; both named where the source does not show."""
    if re.search(r"\bfmaxf?\s*\(|\bmax\s*\(", body):
        return "-INFINITY", " (a max's identity: no value is below it)", "-INFINITY"
    if re.search(r"\bfminf?\s*\(|\bmin\s*\(", body):
        return "INFINITY", " (a min's identity: no value is above it)", "INFINITY"
    if re.search(r"\+=|=\s*[^;]*\+", body):
        return "0", " (a sum's identity: it adds nothing)", "0.0f"
    return "the reduction's identity value", " (0 for a sum, -INFINITY for a max)", "IDENTITY"


def _load_hint(load, name, body):
    """The hint for a load into shared memory with no bound, in the words of the kernel's own reduction."""
    fill, why, value = _identity(body)
    target, source = (part.strip() for part in load.rstrip(";").split("=", 1))
    tile = re.search(r"\]\s*\[", target) is not None
    if tile and value == "0.0f" and re.match(r"ms\s*\[\s*tr\s*\]\s*\[\s*tc\s*\]", target):
        example = ("e.g. `ms[tr][tc] = r < h && idx + tc < k ? m[r*k + idx + tc] : 0.0f;` and `ns[tr][tc] = c < w && "
                   "idx + tr < k ? n[(idx + tr)*w + c] : 0.0f;`")
    else:
        example = f"e.g. `{target} = IN_RANGE ? {source} : {value};`, IN_RANGE testing each index it reads"
    where = ("the last, partial tile, or a block's rows and columns past the matrix" if tile else
             "threads past the data's end: a block wider than the data, or the last, partial chunk")
    return (f"`{load}` in {name} loads {'a tile element' if tile else 'an element into shared memory'} with no bound: "
            f"at the edges ({where}) its index is past the tensor's end. Bound each {'tile ' if tile else ''}load and "
            f"load {fill} outside{why}, {example}. Do not return early instead: every thread of the block must reach "
            "__syncthreads().")


def _unbounded_tile_load(body):
    """The first statement that copies a tensor's element into a __shared__ array with no bound (`ms[tr][tc] = m[...];`
    with no `?:` and no `if` before it), as written; None when every load is bounded or there is no shared memory."""
    shared = set()
    for decl in re.findall(r"__shared__\s+[\w\s]+?\s+([^;]*);", body):
        shared |= set(re.findall(r"(\w+)\s*\[", decl))
    shared |= {m.group(1) for m in re.finditer(r"\b(\w+)\s*=\s*(\w+)\b[^;]*;", body) if m.group(2) in shared}
    for m in re.finditer(r"(?<![\w.])(\w+)\s*((?:\[[^\]]*\]\s*)+)=(?!=)([^;]*);", body):
        target, value = m.group(1), m.group(3)
        reads = set(re.findall(r"(\w+)\s*\[", value)) - shared
        before = body[max(0, m.start() - 160):m.start()]
        if target in shared and reads and "?" not in value and not re.search(r"\bif\s*\([^;{}]*$", before):
            return " ".join(m.group(0).split())
    return None


def _indexes_with(body, var):
    return re.search(rf"\[[^\]]*\b{var}\b[^\]]*\]", body) is not None


def _in_for_header(body, pos):
    start = body.rfind("for", 0, pos)
    return start >= 0 and body.find(")", start) > pos


# ---- Python kernels ------------------------------------------------------------------------------------------

@dataclass
class Guard:
    """One comparison of an index with a bound in a Python kernel's `if` (or early return)."""
    var: str
    bound: str         # as written, e.g. "n"
    text: str          # the test as written, e.g. "i <= n"
    off_by_one: bool   # lets var == bound through
    early: bool        # `if i >= n: return` rather than `if i < n:` around the body
    op: str            # the comparison, var on the left
    bound_node: ast.expr = None


def _source(fn):
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None


def _function_node(src):
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))), None)


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _python_index_vars(fn_node, n_index_params):
    """The launch's indices among the parameters, and the names assigned from them (without reading a tensor)."""
    params = [a.arg for a in fn_node.args.args][:n_index_params]
    index = list(params)
    for node in ast.walk(fn_node):
        if isinstance(node, ast.Assign) and not any(isinstance(n, ast.Subscript) for n in ast.walk(node.value)):
            if _names(node.value) & set(index):
                index += [t.id for t in node.targets if isinstance(t, ast.Name) and t.id not in index]
    return index


def _assigned(fn_node):
    """(name, value) of every plain assignment in a function, tuples unpacked (`r, c = a, b` gives two)."""
    for node in ast.walk(fn_node):
        if not isinstance(node, ast.Assign):
            continue
        for t in node.targets:
            if isinstance(t, ast.Name):
                yield t.id, node.value
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                yield from ((e.id, v) for e, v in zip(t.elts, node.value.elts) if isinstance(e, ast.Name))


def _block_indices(fn_node):
    """{name: "x" or "y"} of a Python kernel's global indices: names assigned from its first parameter's .x or .y
    (`r = blockidx.y*blockdim.y + threadidx.y`)."""
    params = [a.arg for a in fn_node.args.args]
    if not params:
        return {}
    found = {}
    for name, value in _assigned(fn_node):
        axes = {n.attr for n in ast.walk(value) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == params[0] and n.attr in ("x", "y")}
        if len(axes) == 1 and name not in found:
            found[name] = axes.pop()
    return found


def python_words(fn):
    """The names a Python function or kernel uses, for hints in its own words; {} when its source cannot be read.

    loop, start, stop: the loop that sums (`for p in range(k)`: "p", None, "k"); row, col: the output's indices
    (taken from blockidx.y and .x, or the two names of a 2D subscript c[i, j]); out: the tensor it stores into;
    flat: out indexed out[r*w + c] rather than c[i, j]; block: row and col come from blockidx.
    """
    src = _source(fn)
    node = _function_node(src) if src else None
    if node is None:
        return {}
    words = {"lang": "python"}
    loops = [n for n in ast.walk(node) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
             and isinstance(n.iter, ast.Call) and getattr(n.iter.func, "id", None) == "range" and n.iter.args]
    summing = [n for n in loops if any(isinstance(x, ast.AugAssign) for x in ast.walk(n))]
    if summing or loops:
        inner = min(summing or loops, key=lambda n: len(list(ast.walk(n))))
        args = inner.iter.args
        words.update(loop=inner.target.id, stop=ast.unparse(args[-1] if len(args) < 3 else args[1]),
                     start=ast.unparse(args[0]) if len(args) > 1 else None)
    params = {a.arg for a in node.args.args}
    stores = [t for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AugAssign))
              for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
              if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)]
    out = next((t for t in reversed(stores) if t.value.id in params), stores[-1] if stores else None)
    if out is not None:
        words.update(out=out.value.id, flat=not isinstance(out.slice, ast.Tuple))
    block = _row_col(_block_indices(node))
    if block:
        words.update(row=block[0], col=block[1], block=True)
    if out is not None:  # the store's subscript names the row and the column as the student uses them
        i = out.slice
        if isinstance(i, ast.Tuple) and all(isinstance(e, ast.Name) for e in i.elts[:2]):
            words.update(row=i.elts[0].id, col=i.elts[1].id)
        elif (isinstance(i, ast.BinOp) and isinstance(i.op, ast.Add) and isinstance(i.right, ast.Name)
              and isinstance(i.left, ast.BinOp) and isinstance(i.left.op, ast.Mult) and isinstance(i.left.left, ast.Name)):
            words.update(row=i.left.left.id, col=i.right.id)
    return words


_FLIP = {ast.Lt: ">", ast.LtE: ">=", ast.Gt: "<", ast.GtE: "<="}
_OP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def python_guards(kernel, n_index_params=1):
    """The Guards of a Python kernel (None when its source cannot be read): `if i < n:`, `if i >= n: return`, ..."""
    src = _source(kernel)
    fn_node = _function_node(src) if src else None
    if fn_node is None:
        return None
    index = _python_index_vars(fn_node, n_index_params)
    guards = []
    for node in ast.walk(fn_node):
        if not isinstance(node, ast.If):
            continue
        early = bool(node.body) and isinstance(node.body[0], ast.Return)
        tests = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
        for t in tests:
            if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and type(t.ops[0]) in _OP):
                continue
            left, right = t.left, t.comparators[0]
            if isinstance(left, ast.Name) and left.id in index:
                var, op, bound = left.id, _OP[type(t.ops[0])], right
            elif isinstance(right, ast.Name) and right.id in index:
                var, op, bound = right.id, _FLIP[type(t.ops[0])], left
            else:
                continue
            minus_one = isinstance(bound, ast.BinOp) and isinstance(bound.op, ast.Sub) and \
                isinstance(bound.right, ast.Constant) and bound.right.value == 1
            ok = op == (">=" if early else "<") or (op == (">" if early else "<=") and minus_one)
            off = op == (">" if early else "<=") and not minus_one
            if ok or off:
                guards.append(Guard(var, ast.unparse(bound), ast.unparse(t), off, early, op, bound))
    return guards


_SAFE_BUILTINS = {"len": len, "min": min, "max": max, "int": int, "abs": abs}


def _value(node, names):
    """The value of a small expression (a bound such as n, h*w or len(out)) in a frame's names, or None."""
    try:
        return eval(compile(ast.Expression(node), "<bound>", "eval"), {"__builtins__": _SAFE_BUILTINS}, dict(names))
    except Exception:
        return None


def _lets_through(g, names):
    """Whether guard g let this thread run on (True/False), or None when its values are not at hand."""
    var, bound = names.get(g.var), _value(g.bound_node, names) if g.bound_node is not None else None
    if not isinstance(var, int) or not isinstance(bound, int):
        return None
    op = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}[g.op]
    return (not op(var, bound)) if g.early else op(var, bound)


def _frames(tb):
    return [(frame, lineno) for frame, lineno in traceback.walk_tb(tb)]


def _line(frame, lineno):
    return linecache.getline(frame.f_code.co_filename, lineno, frame.f_globals).strip()


def _count(n, word):
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _tensor_sizes(params, names):
    """`x (450 elements), out (150 elements)` for the tensors among a kernel's parameters, in their order."""
    out = []
    for name in params:
        t = getattr(names.get(name), "tensor", names.get(name))
        if hasattr(t, "numel") and hasattr(t, "shape"):
            out.append(f"{name} ({_count(t.numel(), 'element')})")
    return ", ".join(out)


def index_hint(kernel, tb, tensor, k, size, launch, n_index_params):
    """The hint for an index k past the end of a tensor of size elements, raised in a Python kernel.

    tb: the error's traceback (to find the kernel's frame, the line, and the values the thread had); tensor: the
    object indexed (to find its name); launch: ("run_kernel", times) or ("blk_kernel", blocks, threads), or None.
    """
    frames = _frames(tb)
    code = getattr(kernel, "__code__", None)
    kframe = next((f for f, _ in frames if f.f_code is code), None)
    names = dict(kframe.f_locals) if kframe is not None else {}
    # the frame that indexed: the last one before the tensor's own __getitem__/__setitem__
    line, name = "", None
    for (f, lineno), (g, _) in zip(frames, frames[1:]):
        if g.f_code.co_name in ("__getitem__", "__setitem__") and g.f_locals.get("self") is tensor:
            line = _line(f, lineno)
            name = next((v for v, obj in f.f_locals.items() if obj is tensor), None)
    what = f"`{name}`" if name else "the tensor"
    where = f" in `{line}`" if line else ""
    runner = launch[0] if launch else "the runner"
    try:
        param_names = list(inspect.signature(kernel).parameters)
    except (TypeError, ValueError):
        param_names = []
    params = ", ".join(param_names)
    guards = python_guards(kernel, n_index_params) if kernel is not None else None
    src = _source(kernel) if kernel is not None else None
    fn_node = _function_node(src) if src else None
    block = _block_indices(fn_node) if fn_node is not None else {}
    index_value = {v: names[v] for v in ([g.var for g in guards or []] + list(block) + ["i"])
                   if isinstance(names.get(v), int)}
    thread = ", ".join(f"{v} = {val}" for v, val in list(index_value.items())[:2])
    thread = f" (this thread has {thread})" if thread else ""
    sizes = _tensor_sizes(param_names, names)
    order = (f" The arguments you pass to {runner} reach the kernel in the order of its parameters ({params}); "
             f"here it got {sizes}." if params and sizes else "")
    past = f"{what} has {_count(size, 'element')} (0 to {size - 1:,}), and{where} asked for index {k:,}{thread}."

    loose = [g for g in guards or [] if g.off_by_one]
    for g in loose:
        through = _lets_through(g, names)
        bound = _value(g.bound_node, names)
        if through is None or (through and names.get(g.var) == bound):
            how = (f"`if {g.text}: return` lets {g.var} = {g.bound} on" if g.early
                   else f"`{g.text}` is true for {g.var} = {g.bound}")
            fix = f"if {g.var} >= {g.bound}: return" if g.early else f"if {g.var} < {g.bound}:"
            return (f"your guard lets {g.var} == {g.bound} through: use `{fix}` ({how}, one past the last "
                    f"index). {past}")
    target = re.match(r"(\w+)\s*\[.*\]\s*=[^=]", line)
    if runner == "blk_kernel2d_shar" and target and target.group(1) != name and target.group(1) not in param_names:
        return (f"`{line}` loads a tile element with no bound: at the edges (the last, partial tile, or a block's rows "
                f"and columns past the matrix) the index is past the end. {past} Bound each tile load and load 0.0 "
                "outside, e.g. `ms[tr*tw + tc] = m[r*k + idx + tc] if r < h and idx + tc < k else 0.0` and "
                "`ns[tr*tw + tc] = n[(idx + tr)*w + c] if c < w and idx + tr < k else 0.0`. Do not return early "
                "instead: every thread of the block must reach syncthreads().")
    held = [(g, _lets_through(g, names)) for g in guards or [] if not g.off_by_one]
    outside = [g for g, through in held if through is False]
    if outside:
        g = outside[0]
        return (f"this thread is past the end ({g.var} = {names.get(g.var)}), and your guard `{g.text}` says so, "
                f"but the index{where} runs anyway: it is outside the guard (before it, or not indented under it). "
                f"Put every access inside `if {g.var} < {g.bound}:`. {past}")
    guarded_here = [g for g, through in held if through]
    unbounded = [v for v in block if v not in {g.var for g, _ in held} and isinstance(names.get(v), int)
                 and re.search(rf"\b{v}\b", line)]
    if guarded_here and unbounded:
        g, v = guarded_here[0], unbounded[0]
        other = {"h": "w", "w": "h"}.get(g.bound, "its size")
        return (f"your guard `{g.text}` bounds {g.var} but not {v}, so a thread past the last "
                f"{'column' if block[v] == 'x' else 'row'} still runs. Every index needs its bound: "
                f"`if {g.text} and {v} < {other}:`. {past}")
    first_thread = all(v == 0 for v in index_value.values()) and len(index_value) > 0
    if guarded_here or (held and k >= 2 * size) or (guards == [] and first_thread):
        why = (f"your guard `{guarded_here[0].text}` holds for this thread, so the guard is not the problem"
               if guarded_here else "even the first threads index past the end, so a guard would not help"
               if guards == [] and first_thread else f"the index is {k / size:.1f} times the size")
        return (f"{past} {why[0].upper()}{why[1:]}: either the offset added to the index is too big for "
                f"{what}, or {what} is not the tensor you meant.{order}")
    if guards == [] and runner.startswith("blk_kernel"):
        two_d = _row_col(block)
        guard = (f"`if {two_d[0]} < h and {two_d[1]} < w:` (or return when {two_d[0]} >= h or {two_d[1]} >= w)"
                 if two_d else f"`if {next(iter(block), 'i')} < n:` (or return when {next(iter(block), 'i')} >= n)")
        return (f"did you forget the guard? {runner} runs whole blocks, so the last block has threads past the "
                f"end: start the kernel with {guard}. {past}")
    if guards == [] and runner == "run_kernel":
        times = launch[1] if launch and len(launch) > 1 else None
        i, n = names.get("i"), names.get("n")
        if isinstance(i, int) and isinstance(n, int) and isinstance(times, int) and n <= i < times:
            return (f"{past} run_kernel called the kernel for i = 0 to {times - 1}, but n = {n}: pass the number "
                    "of elements as times (each i from 0 to n-1 once).")
        last = times - 1 if isinstance(times, int) else "times-1"
        return (f"{past} run_kernel called the kernel for i = 0 to {last}: "
                f"check the index{where} against that range (an offset too big, or times larger than the number "
                f"of elements).{order}")
    return f"{past} Check the index expression and the size of {what}.{order}"


# ---- Python rungs stopped at their time limit -----------------------------------------------------------------

def _loop_at(code, lineno):
    """The innermost for/while statement of code's function that holds line lineno: (kind, its first line) or None."""
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return None
    fn_node = _function_node(textwrap.dedent("".join(lines)))
    if fn_node is None:
        return None
    rel = lineno - first + 1
    best = None
    for node in ast.walk(fn_node):
        if isinstance(node, (ast.For, ast.While)) and node.lineno <= rel <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.lineno:
                best = node
    if best is None:
        return None
    return ("for" if isinstance(best, ast.For) else "while"), lines[best.lineno - 1].strip()


def timeout_hint(tb, ran, seconds):
    """The hint for a Python rung stopped after seconds: both causes, the one the stopped code points to first."""
    frames = _frames(tb)
    kernel = None
    for (f, _), nxt in zip(frames, frames[1:]):
        if f.f_code.co_name in ("_call", "_thread") and f.f_globals.get("__name__") == "course.ladder":
            kernel = nxt
    both = ("a loop that never ends (its condition never becomes false: does what it tests change inside it?), "
            "or a kernel that loops over every element itself although run_kernel and blk_kernel already call it "
            "once per element (a kernel does one element: drop its loop over them)")
    if kernel is None:
        frame, lineno = frames[-1] if frames else (None, None)
        loop = _loop_at(frame.f_code, lineno) if frame is not None else None
        if loop and loop[0] == "while":
            return f"it was stopped in `{loop[1]}`: a loop that never ends? Its condition must become false."
        return f"it ran past the limit: {both}."
    frame, lineno = kernel
    loop = _loop_at(frame.f_code, lineno)
    name = frame.f_code.co_name
    calls = ran.get("threads", 0)
    launch = (ran.get("launches") or [None])[-1]
    total = launch[-1] if launch else None
    progress = (f", in call {calls:,}{f' of {total:,}' if isinstance(total, int) else ''}" if calls else "")
    if loop and loop[0] == "for":
        return (f"it was stopped inside `{loop[1]}` of your kernel {name}{progress}. Either the kernel loops over "
                "every element itself although run_kernel and blk_kernel already call it once per element, which "
                "does all the work once per element (a kernel does ONE element: drop that loop), or the loop "
                "never ends.")
    if loop and loop[0] == "while":
        return (f"it was stopped inside `{loop[1]}` of your kernel {name}{progress}: a loop that never ends? Its "
                "condition must become false, so what it tests must change inside it (for a guard, a kernel "
                "needs `if`, not `while`). Or the kernel loops over every element itself although the runner "
                "already calls it once per element.")
    return f"it was stopped in your kernel {name}{progress}: {both}."


# ---- what the runners did during one check ---------------------------------------------------------------------

def runner_hint(ran, n_out, nothing_written=False, unwritten=None, unit="element"):
    """A hint from what run_kernel/blk_kernel did during a call whose output has unwritten elements, or None.

    n_out: the threads the lesson's kernel needs, one a unit ("element", or "row": Exercise.threads_for), or None;
    nothing_written: no element of the output was written (then even no runner at all says something);
    unwritten: where the output still holds the fill value (a 2D grid that covers the output but left whole rows
    or columns unwritten took its row from x, its column from y)."""
    launches = ran.get("launches", [])
    if not launches:
        return None if not nothing_written else (
            "nothing was stored into the tensor your function returns: assign each element of that very "
            "tensor (res[i] = ...); a loop that only computes, compares (==) or stores elsewhere leaves it as it was.")
    threads, returned = ran.get("threads", 0), ran.get("returned", 0)
    kind = launches[-1][0]
    if threads == 0:
        if kind == "run_kernel":
            return (f"run_kernel ran no thread: it was called with times = {launches[-1][1]}. Pass the number of "
                    "elements.")
        blocks, per = launches[-1][1], launches[-1][2]
        need = "" if n_out is None else f" for {n_out:,} {unit}{'' if n_out == 1 else 's'}"
        return (f"{kind} ran no thread: it was called with {blocks} blocks of {per} threads{need}. "
                f"n // threads is 0 when n < threads: blocks = cdiv(n, threads) rounds up.")
    if returned:
        who = ran.get("returned_by") or "your kernel"
        return (f"{who} returned a value in {returned:,} of {threads:,} threads, and the runner throws a kernel's "
                f"return value away: store the result into the output instead, {_store(ran)} = ... (a kernel returns "
                "nothing).")
    if n_out is not None and threads < n_out:
        blocks = launches[-1][1]
        grid = (f" ({blocks} block{'' if blocks == 1 else 's'} of {launches[-1][2]})" if kind == "blk_kernel" else "")
        return (f"{kind} ran {threads:,} threads{grid} for {n_out:,} {unit}s, so some got no thread: "
                "blocks = cdiv(n, threads) rounds up (n // threads rounds down).")
    if unwritten is not None and unwritten.dim() == 2 and kind.startswith("blk_kernel2d"):
        return _swapped_axes(launches[-1], unwritten, python_words(ran.get("kernel")))
    return None


def _store(ran):
    """How the last launch's kernel stores one element, in its own names: out[i], out[i, j] or out[r*w + c]."""
    launch, kernel = ran["launches"][-1], ran.get("kernel")
    words = python_words(kernel) if kernel is not None else {}
    try:
        params = list(inspect.signature(kernel).parameters)
    except (TypeError, ValueError):
        params = []
    src = _source(kernel) if kernel is not None else None
    fn_node = _function_node(src) if src else None
    unused = [a for a in params if fn_node is not None and not any(
        isinstance(n, ast.Name) and n.id == a for b in fn_node.body for n in ast.walk(b))]
    out = words.get("out") or (unused[0] if unused else "out")  # a kernel that returns its value leaves its output unused
    if launch[0] == "run_kernel" and isinstance(launch[1], tuple):
        return f"{out}[{', '.join((params + ['i', 'j'])[:2])}]"
    if launch[0].startswith("blk_kernel2d"):
        return f"{out}[{words.get('row', 'r')}*w + {words.get('col', 'c')}]"
    return f"{out}[{params[0] if launch[0] == 'run_kernel' and params else 'i'}]"


def _swapped_axes(launch, unwritten, words):
    """The hint for a 2D grid that covers the output while whole rows (or columns) past its x (or y) extent were
    never written: the kernel takes its row from x and its column from y. None when that does not fit."""
    blocks, per = launch[1], launch[2]
    across, down = blocks.x * per.x, blocks.y * per.y
    h, w = unwritten.shape
    rows, cols = unwritten.all(1), unwritten.all(0)
    if across < w or down < h:
        return None
    if across < h and bool(rows[across:].all()) and not bool(rows[:across].any()):
        what = f"the rows from {across} on were never written: {across} is the grid's x extent"
    elif down < w and bool(cols[down:].all()) and not bool(cols[:down].any()):
        what = f"the columns from {down} on were never written: {down} is the grid's y extent"
    else:
        return None
    r, c = words.get("row", "r"), words.get("col", "c")
    return (f"the grid covers all {_count(h, 'row')} and {_count(w, 'column')} ({across} threads across, {down} down), yet {what}, so "
            f"your kernel takes its row from x and its column from y. The row comes from y, the column from x: "
            f"{r} = blockidx.y*blockdim.y + threadidx.y, {c} = blockidx.x*blockdim.x + threadidx.x.")


# ---- Triton: what a launch function's source says that CPU mode's interpreter cannot show -------------------

def _triton_calls(text, name, in_loop=False):
    """(call node, source line) of each tl.<name>(...) call in the text of a Triton answer (any module alias); with
    in_loop, only those inside a for or while loop."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    roots = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))] if in_loop else [tree]
    lines, found = text.splitlines(), {}
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name:
                found[id(node)] = (node, lines[node.lineno - 1].strip())
    return list(found.values())


def _argument(call, keyword, position):
    """A call's argument given by keyword or at a position, as its AST node; None when not given."""
    found = [k.value for k in call.keywords if k.arg == keyword]
    return found[0] if found else (call.args[position] if len(call.args) > position else None)


def tf32_dots(text):
    """The lines of a Triton answer whose tl.dot leaves float32 inputs to TF32: input_precision left at its default
    ("tf32" on NVIDIA GPUs) or written "tf32", or allow_tf32=True. A precision that is not a literal tells nothing."""
    out = []
    for call, line in _triton_calls(text, "dot"):
        precision, allow = _argument(call, "input_precision", 3), _argument(call, "allow_tf32", 4)
        if precision is not None:
            tf32 = isinstance(precision, ast.Constant) and precision.value == "tf32"
        else:
            tf32 = allow is None or (isinstance(allow, ast.Constant) and allow.value is True)
        if tf32:
            out.append(line)
    return list(dict.fromkeys(out))


def loads_without_other(text):
    """The lines of a Triton answer that load a tile in a loop with mask= and no other=: the lanes the mask turns off
    hold undefined values (Triton's docs), which a sum over k takes in."""
    return list(dict.fromkeys(line for call, line in _triton_calls(text, "load", in_loop=True)
                              if _argument(call, "mask", 1) is not None and _argument(call, "other", 2) is None))


def _jit_functions(text):
    """The @triton.jit functions of a Triton answer's text, as AST nodes ([] when it does not parse)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    return [n for n in tree.body if isinstance(n, ast.FunctionDef)
            and any("jit" in ast.unparse(d) for d in n.decorator_list)]


def subscripted_pointers(text):
    """The `x_ptr[...]` of a Triton answer's kernels: a pointer parameter (not a tl.constexpr) indexed with [ ], which
    Python allows and Triton cannot compile: a kernel reads memory with tl.load(x_ptr + offs)."""
    found = []
    for kernel in _jit_functions(text):
        pointers = {a.arg for a in kernel.args.args if "constexpr" not in ast.unparse(a.annotation or ast.Constant(""))}
        found += [(kernel.name, ast.unparse(n)) for n in ast.walk(kernel)
                  if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in pointers]
    return found


def _grids(text):
    """The number of axes of each launch grid a Triton answer's plain functions write out (`kernel[(a, b)](...)`, or
    `grid = (a,)` then `kernel[grid](...)`); None for a grid it cannot count (a lambda, a name from elsewhere)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    out = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or any("jit" in ast.unparse(d) for d in fn.decorator_list):
            continue
        tuples = {t.id: len(node.value.elts) for node in ast.walk(fn) if isinstance(node, ast.Assign)
                  and isinstance(node.value, ast.Tuple) for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                grid = node.func.slice
                out.append(len(grid.elts) if isinstance(grid, ast.Tuple) else
                           tuples.get(grid.id) if isinstance(grid, ast.Name) else None)
    return out


def program_ids_past_the_grid(text):
    """(kernel, `tl.program_id(1)` as written, axes of the grid) when a kernel asks for a program id on an axis that
    every launch's grid leaves out: that id is 0 in every program. None when the grids cannot be counted."""
    grids = _grids(text)
    if not grids or None in grids:
        return None
    for kernel in _jit_functions(text):
        for node in ast.walk(kernel):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "program_id":
                axis = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "axis"), None)
                if isinstance(axis, ast.Constant) and isinstance(axis.value, int) and axis.value >= max(grids):
                    return kernel.name, ast.unparse(node), max(grids)
    return None


def triton_error_hint(text, error):
    """The hint a Triton answer's source gives for an error its launch raised, or None: a pointer indexed with [ ]."""
    indexed = subscripted_pointers(text)
    if indexed and re.search(r"forget to add @triton\.jit|not (?:iterable|subscriptable)|_semantic", error):
        kernel, shown = indexed[0]
        pointer = shown.split("[")[0]
        inside = shown[len(pointer) + 1:-1]
        return (f"`{shown}` in {kernel} indexes a pointer: in a kernel a tensor is only the address of its first "
                f"element, and [ ] picks axes of a block (offs[:, None]). Read through it with "
                f"tl.load({pointer} + {inside}, mask=mask), write with tl.store({pointer} + {inside}, value, "
                "mask=mask)")
    return None


def triton_output_hint(text):
    """The hint a Triton answer's source gives for wrong output elements, or None: a program id on an axis the grid
    does not have."""
    past = program_ids_past_the_grid(text)
    if past:
        kernel, call, axes = past
        return (f"{kernel} reads `{call}`, but every launch's grid has {axes} ax{'is' if axes == 1 else 'es'} "
                f"(axis 0{' only' if axes == 1 else f' to {axes - 1}'}), so that id is 0 in every program and they all "
                f"handle the same elements. Either give the grid that axis (one entry per axis the kernel reads, "
                f"e.g. grid = (triton.cdiv(w, BN), triton.cdiv(h, BM))), or read an axis it has: tl.program_id(0) on "
                f"a grid of one entry, (triton.cdiv(n, BLOCK_SIZE),)")
    return None

"""The mechanical step from L2 to L3: to_cuda reads a Python kernel of the ladder's form and writes its CUDA C (taught in drills/09).

It translates what the lessons' kernels use (index arithmetic, guards and early returns, `for ... in range`,
local accumulators, literals, min/max, `.x`/`.y`, the shared tile and the barrier) with the meaning the Python
rung gives it: a literal that meets a float32 tensor becomes `0.2989f`, a chained comparison `&&`, Python's `/`
a float division. Where the same C text would mean something else on a GPU (`int` arithmetic past 2**31, `//`
and `%` on negative numbers, `+=` into an element other threads add to), the translation keeps Python's text and
says so in its notes; an index no guard keeps inside is not noted (drill 9's last exercise: the memory check finds it). Anything else is refused with its line and the reason.
"""
import ast
import inspect
import textwrap
from dataclasses import dataclass

import torch

from .cuda import cuda_begin

__all__ = ["CannotTranslate", "Translation", "to_cuda"]

# the tensors a kernel may take: their dtype -> the C type of an element
C_TYPES = {torch.uint8: "unsigned char", torch.int8: "signed char", torch.int32: "int", torch.float32: "float",
           torch.float64: "double"}
INT, DOUBLE, BOOL = "int", "double", "bool"  # the kinds of Python values: a Python int, float, bool
# a tensor element's kind is "t:" + its C type: 0-d tensors compute in their dtype, as PyTorch promotes them
_REFUSED = {
    ast.List: "a Python list: CUDA has no lists (use a tensor argument, or shared memory)",
    ast.ListComp: "a list comprehension: CUDA has no lists (write the loop)",
    ast.Tuple: "a tuple: CUDA has no tuples (one value per variable)",
    ast.Dict: "a dict: CUDA has no dicts",
    ast.DictComp: "a dict comprehension: CUDA has no dicts",
    ast.Set: "a set: CUDA has no sets",
    ast.SetComp: "a set comprehension: CUDA has no sets",
    ast.Lambda: "a lambda: a CUDA kernel calls only __device__ functions",
    ast.Try: "try/except: a CUDA kernel cannot catch an error (guard the index instead)",
    ast.With: "a with block: a CUDA kernel has no context managers",
    ast.Import: "an import: a CUDA kernel imports nothing",
    ast.ImportFrom: "an import: a CUDA kernel imports nothing",
    ast.FunctionDef: "a nested function: write a __device__ function by hand",
    ast.Global: "global: a CUDA kernel writes only through its arguments",
    ast.Nonlocal: "nonlocal: a CUDA kernel writes only through its arguments",
    ast.Assert: "an assert: a CUDA kernel cannot raise (a guard with `return` is the CUDA way)",
    ast.Raise: "raise: a CUDA kernel cannot raise an exception",
    ast.JoinedStr: "an f-string: CUDA has no strings (print with printf)",
    ast.Yield: "yield: a kernel is not a generator",
    ast.Await: "await: a kernel is not a coroutine",
    ast.Starred: "a starred argument: a CUDA kernel takes a fixed list of arguments",
}
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "/", ast.Mod: "%",
           ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_PREC = {ast.Mult: 3, ast.Div: 3, ast.FloorDiv: 3, ast.Mod: 3, ast.Add: 2, ast.Sub: 2, ast.LShift: 1,
         ast.RShift: 1, ast.BitAnd: 0, ast.BitXor: -1, ast.BitOr: -2}
_PREC["cmp"] = -5  # an operand of a comparison: arithmetic binds tighter in C as in Python
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_MATH = {"sqrt": "sqrt", "exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tanh": "tanh", "floor": "floor",
         "ceil": "ceil", "fabs": "fabs"}
INT32_MAX = 2**31 - 1


class CannotTranslate(ValueError):
    """A kernel to_cuda cannot translate: the message names the line and the reason."""


@dataclass(frozen=True)
class Translation:
    """What to_cuda writes: the kernel and its launching wrapper, the wrapper's declaration, and notes on meanings."""
    kernel: str       # the __global__ function
    wrapper: str      # the C++ function that launches it, taking blocks and threads first as the Python runner does
    cpp_src: str      # the wrapper's declaration, for load_cuda
    func: str         # the wrapper's name (the Python kernel's)
    notes: tuple      # "line N: ..." where the same text means something else in CUDA C

    @property
    def cuda_src(self):
        """cuda_begin, the kernel and the wrapper: what load_cuda builds."""
        return cuda_begin + "\n" + self.kernel + "\n" + self.wrapper

    def __str__(self):
        return self.kernel + "\n" + self.wrapper


def _float_kind(kind):
    return kind in (DOUBLE, "t:float", "t:double")


def _promote(a, b, op=None):
    """The kind of `a op b` as Python and PyTorch compute it (a 0-d tensor wins over a Python number of its category)."""
    a, b = (INT if k == BOOL else k for k in (a, b))
    if a.startswith("t:") and b.startswith("t:"):
        if _float_kind(a) or _float_kind(b):
            return "t:double" if "t:double" in (a, b) else "t:float"
        kind = a if a == b else "t:int"
    elif a.startswith("t:") or b.startswith("t:"):
        t, py = (a, b) if a.startswith("t:") else (b, a)
        kind = t if _float_kind(t) or py == INT else "t:float"
    else:
        kind = DOUBLE if DOUBLE in (a, b) else INT
    if op is ast.Div and not _float_kind(kind):
        kind = "t:float" if kind.startswith("t:") else DOUBLE
    return kind


def _join(a, b):
    """The one C type a variable assigned values of kinds a and b must have."""
    return a if a == b else _promote(a, b)


def _c_type(kind):
    return kind[2:] if kind.startswith("t:") else kind


class _Kernel:
    def __init__(self, fn, args):
        self.fn = fn
        lines, self.first = inspect.getsourcelines(fn)
        self.tree = ast.parse(textwrap.dedent("".join(lines))).body[0]
        if not isinstance(self.tree, ast.FunctionDef):
            raise CannotTranslate(f"{fn!r} is not a function defined with def")
        self.globals = getattr(fn, "__globals__", {})
        self.notes, self.out = [], []
        params = [a.arg for a in self.tree.args.args]
        if self.tree.args.vararg or self.tree.args.kwarg or self.tree.args.kwonlyargs or self.tree.args.defaults:
            self.refuse(self.tree, "*args, **kwargs or default values: a CUDA kernel takes a fixed list of arguments")
        runner_args = len(params) - len(args)
        if runner_args not in (3, 5):
            raise CannotTranslate(
                f"{self.tree.name} takes {len(params)} arguments and you gave {len(args)} examples: give one example "
                "for each argument after blockidx, threadidx, blockdim (and shared, syncthreads for "
                "blk_kernel2d_shar's form), as you pass them to the runner")
        self.shared = runner_args == 5
        self.ids = dict(zip(params[:3], ("blockIdx", "threadIdx", "blockDim")))
        if self.shared:
            self.shared_name, self.sync_name = params[3], params[4]
        self.two_d = self.shared or any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                                        and n.value.id in self.ids for n in ast.walk(self.tree))
        self.params = {}  # name -> kind ("t:<c type>" pointer for a tensor)
        for name, value in zip(params[runner_args:], args):
            value = getattr(value, "tensor", value)  # a CheckedTensor, as the runners hand it to the kernel
            if isinstance(value, torch.Tensor):
                if value.dtype not in C_TYPES:
                    self.refuse(self.tree, f"{name} is a {value.dtype} tensor: to_cuda knows "
                                           f"{', '.join(str(d).replace('torch.', '') for d in C_TYPES)}")
                self.params[name] = ("ptr", C_TYPES[value.dtype])
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                self.refuse(self.tree, f"{name} is a {type(value).__name__}: a kernel takes tensors, ints and floats")
            else:
                self.params[name] = (INT if isinstance(value, int) else DOUBLE, None)
        self.scopes = [{}]   # name -> C type of the variables declared in each open block
        self.closed = {}     # variables declared in blocks already closed: name -> line
        self.hoisted = 0
        self.products = {}  # int products, which C computes in 32 bits: text -> its first line

    # ---- messages ----
    def line(self, node):
        return self.first + getattr(node, "lineno", 1) - 1

    def refuse(self, node, why):
        raise CannotTranslate(f"line {self.line(node)}: {why}")

    def note(self, node, text):
        entry = f"line {self.line(node)}: {text}"
        if entry not in self.notes:
            self.notes.append(entry)

    # ---- names and kinds ----
    def lookup(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def kind(self, node):
        """The kind of an expression's value in the Python rung."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return BOOL
            if isinstance(node.value, int):
                return INT
            if isinstance(node.value, float):
                return DOUBLE
            self.refuse(node, f"the constant {node.value!r}: a kernel computes with numbers")
        if isinstance(node, ast.Name):
            if node.id in self.ids:
                return INT
            if self.shared and node.id == self.shared_name:
                return "ptr:float"
            if node.id in self.params:
                kind, elem = self.params[node.id]
                return "ptr:" + elem if kind == "ptr" else kind
            local = self.lookup(node.id)
            if local is not None:
                return local
            if node.id in self.closed:
                self.refuse(node, f"{node.id} was assigned inside a block (line {self.closed[node.id]}) and is used "
                                  "after it: in C a variable lives only inside its { }; assign it before the block")
            value = self.globals.get(node.id)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return INT if isinstance(value, int) else DOUBLE
            self.refuse(node, f"{node.id} is not an argument, a local variable or a number defined outside the kernel")
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in self.ids and node.attr in "xyz":
                return INT
            self.refuse(node, f"the attribute .{node.attr}: a CUDA kernel has pointers and numbers, no attributes "
                              "(pass a tensor's sizes as int arguments)")
        if isinstance(node, ast.Subscript):
            base = self.kind(node.value)
            if not base.startswith("ptr:"):
                self.refuse(node, "indexing something that is not a tensor argument or a slice of shared memory")
            return base if isinstance(node.slice, ast.Slice) else "t:" + base[4:]
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINOPS:
                self.refuse(node, f"the operator {type(node.op).__name__}: write it out (x*x for x**2)")
            return _promote(self.kind(node.left), self.kind(node.right), type(node.op))
        if isinstance(node, ast.UnaryOp):
            return BOOL if isinstance(node.op, ast.Not) else self.kind(node.operand)
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            return BOOL
        if isinstance(node, ast.IfExp):
            return _join(self.kind(node.body), self.kind(node.orelse))
        if isinstance(node, ast.Call):
            return self.call_kind(node)
        if isinstance(node, ast.GeneratorExp):
            self.refuse(node, "a generator outside sum(): CUDA has no generators (write the loop)")
        self.refuse(node, _REFUSED.get(type(node), f"{type(node).__name__}: not a kernel's Python"))

    def call_kind(self, node):
        name = self.callee(node)
        if name in ("min", "max"):
            kind = self.kind(node.args[0])
            for a in node.args[1:]:
                kind = _join(kind, self.kind(a))
            return kind
        if name == "cdiv":
            return INT
        if name == "abs":
            return self.kind(node.args[0])
        if name == "int":
            return INT
        if name == "float":
            return DOUBLE
        if name == "sum":
            gen = self.generator(node)
            self.scopes.append({gen.generators[0].target.id: INT} if isinstance(gen.generators[0].target, ast.Name) else {})
            try:
                return _promote(INT, self.kind(gen.elt))
            finally:
                self.scopes.pop()
        if name in _MATH:
            return "t:float" if self.kind(node.args[0]).startswith("t:") else DOUBLE
        if name == "float32":
            return "t:float"
        self.refuse(node, f"calls {name}, which to_cuda does not know: a CUDA kernel calls only __device__ functions")

    def callee(self, node):
        f = node.func
        if isinstance(f, ast.Name):
            name = f.id
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math" \
                and f.attr in _MATH:
            name = f.attr
        elif isinstance(f, ast.Attribute) and f.attr == "float" and not node.args:
            name = "float32"  # x[i].float(): the element as a float32 tensor
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch":
            self.refuse(node, f"torch.{f.attr}: a PyTorch operation works on whole tensors; a kernel computes one "
                              "element per thread")
        else:
            self.refuse(node, f"a method call (.{getattr(f, 'attr', '?')}): a CUDA kernel has no methods on numbers or "
                              "pointers")
        if node.keywords:
            self.refuse(node, f"keyword arguments to {name}: C has none")
        if name == "print":
            self.refuse(node, "print inside an expression")
        if name not in ("min", "max", "sum") and name != "float32" and len(node.args) != {"cdiv": 2}.get(name, 1):
            self.refuse(node, f"{name} with {len(node.args)} arguments")
        return name

    def generator(self, node):
        gen = node.args[0] if len(node.args) == 1 else None
        if not isinstance(gen, ast.GeneratorExp) or len(gen.generators) != 1 or gen.generators[0].ifs:
            self.refuse(node, "sum() of something other than one generator over a range: write the loop")
        return gen

    # ---- expressions ----
    def expr(self, node, want=None):
        """C text of an expression; want: the kind of the operation it is an operand of (a float literal meeting a
        float32 tensor is a float32 number, `0.2989f`)."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return "true" if node.value else "false"
            if isinstance(node.value, float):
                text = repr(node.value)
                text = text if any(c in text for c in ".e") else text + ".0"
                if text in ("inf", "-inf", "nan"):
                    self.refuse(node, f"float({text!r}): write INFINITY or NAN")
                return text + "f" if want == "t:float" else text
            if abs(node.value) > INT32_MAX:
                self.note(node, f"{node.value} does not fit a C int: written as a long long constant")
                return f"{node.value}LL"
            return str(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.ids:
                return f"{self.ids[node.id]}.x"
            kind = self.kind(node)
            if node.id not in self.params and self.lookup(node.id) is None and kind[:4] != "ptr:":
                return repr(self.globals[node.id]) + ("f" if want == "t:float" and kind == DOUBLE else "")
            if want == "t:float" and kind == DOUBLE:
                return f"(float){node.id}"  # PyTorch rounds a Python float to float32 before it meets the tensor
            return node.id
        if isinstance(node, ast.Attribute):
            self.kind(node)
            return f"{self.ids[node.value.id]}.{node.attr}"
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice):
                s = node.slice
                if s.upper is not None and s.lower is None and s.step is None:
                    return self.expr(node.value)
                if s.upper is None and s.step is None and s.lower is not None:
                    return f"({self.expr(node.value)} + {self.expr(s.lower)})"
                self.refuse(node, "a slice with both ends or a step: slice shared memory as shared[:k] or shared[k:]")
            self.kind(node)
            if isinstance(node.slice, ast.Tuple):
                self.refuse(node, "a tensor indexed with several indices: the kernel sees a pointer; flatten the "
                                  "tensor and index it as x[row*w + col]")
            idx = self.expr(node.slice)
            if self.kind(node.slice) not in (INT, BOOL) and not self.kind(node.slice).startswith("t:") \
                    or _float_kind(self.kind(node.slice)):
                self.refuse(node, "a float index: an index must be a whole number")
            return f"{self.expr(node.value)}[{idx}]"
        if isinstance(node, ast.BinOp):
            kind = self.kind(node)
            lk, rk = self.kind(node.left), self.kind(node.right)
            inner = kind if kind == "t:float" else None
            op = type(node.op)
            left, right = self.operand(node.left, inner, op), self.operand(node.right, inner, op, right=True)
            if op is ast.Div and not _float_kind(lk) and not _float_kind(rk):
                cast = "float" if kind == "t:float" else "double"  # Python's / divides as floats
                left = f"({cast}){left}" if isinstance(node.left, (ast.Name, ast.Constant, ast.Subscript)) \
                    else f"({cast})({self.expr(node.left, inner)})"
            if op in (ast.FloorDiv, ast.Mod):
                if _float_kind(kind):
                    fn = "floorf" if kind == "t:float" else "floor"
                    if op is ast.FloorDiv:
                        return f"{fn}({left} / {right})"
                    self.refuse(node, "% on floats: C's fmod keeps the sign of the left operand, Python's % the right's")
                sign = "floors, C truncates toward zero" if op is ast.FloorDiv else \
                    "takes the sign of the right operand, C's % the sign of the left"
                self.note(node, f"`{'//' if op is ast.FloorDiv else '%'}` became `{_BINOPS[op]}`: on a negative "
                                f"operand they differ (Python {sign})")
            if op is ast.Mult and kind == INT and not any(isinstance(n, (ast.Name, ast.Attribute)) and (
                    getattr(n, "id", None) in self.ids or isinstance(n, ast.Attribute)) for n in ast.walk(node)) \
                    and not all(isinstance(n, ast.Constant) for n in (node.left, node.right)):
                self.products.setdefault(ast.unparse(node), self.line(node))
            text = f"{left} {_BINOPS[op]} {right}"
            if kind in ("t:unsigned char", "t:signed char"):
                return f"({kind[2:]})({text})"  # PyTorch keeps a byte's arithmetic in bytes: it wraps at 256
            return text
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return f"!{self.operand(node.operand)}"
            if isinstance(node.op, ast.USub):
                return f"-{self.operand(node.operand, want)}"
            if isinstance(node.op, ast.UAdd):
                return self.operand(node.operand, want)
            return f"~{self.operand(node.operand)}"
        if isinstance(node, ast.Compare):
            parts, left = [], node.left
            for op, right in zip(node.ops, node.comparators):
                if type(op) not in _CMPOPS:
                    self.refuse(node, f"{type(op).__name__}: CUDA compares numbers only with < <= > >= == !=")
                both = _promote(self.kind(left), self.kind(right))
                want_f = both if both == "t:float" else None
                parts.append(f"{self.operand(left, want_f, 'cmp')} {_CMPOPS[type(op)]} "
                             f"{self.operand(right, want_f, 'cmp')}")
                left = right
            if len(parts) > 1:
                self.note(node, f"`{ast.unparse(node)}` became `{' && '.join(parts)}`: in C the chained text means "
                                "((a < b) < c), a comparison of 0 or 1")
                return "(" + " && ".join(parts) + ")"
            return parts[0]
        if isinstance(node, ast.BoolOp):
            op = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + op.join(self.expr(v) if isinstance(v, ast.Compare) else self.operand(v)
                                 for v in node.values) + ")"
        if isinstance(node, ast.IfExp):
            kind = self.kind(node)
            want = kind if kind == "t:float" else None
            return f"({self.expr(node.test)} ? {self.expr(node.body, want)} : {self.expr(node.orelse, want)})"
        if isinstance(node, ast.Call):
            return self.call(node, want)
        self.kind(node)  # refuses with the reason
        self.refuse(node, f"{type(node).__name__}: not a kernel's Python")

    def operand(self, node, want=None, parent=None, right=False):
        """An expression as an operand: in parentheses where C would otherwise group it otherwise (Python's precedence)."""
        text = self.expr(node, want)
        if isinstance(node, ast.BinOp):
            mine, theirs = _PREC[type(node.op)], _PREC.get(parent, 9)
            if text.startswith("(unsigned char)(") or text.startswith("(signed char)(") or \
                    mine > theirs or mine == theirs and not right:
                return text
            return f"({text})"
        if isinstance(node, (ast.UnaryOp, ast.Compare)) and not text.startswith("("):
            return f"({text})"
        return text

    def call(self, node, want=None):
        name = self.callee(node)
        kind = self.kind(node)
        if name in ("min", "max"):
            if len(node.args) < 2:
                self.refuse(node, f"{name} of one argument (an iterable): CUDA's {name} takes two numbers")
            want_f = kind if kind == "t:float" else None
            text = self.operand(node.args[0], want_f)
            for a in node.args[1:]:
                text = f"{name}({text}, {self.operand(a, want_f)})"
            return text
        if name == "cdiv":
            return f"cdiv({self.expr(node.args[0])}, {self.expr(node.args[1])})"
        if name == "abs":
            return f"{'fabs' if _float_kind(kind) else 'abs'}({self.expr(node.args[0], want)})"
        if name == "int":
            return f"(int){self.operand(node.args[0])}"
        if name == "float":
            return f"(double){self.operand(node.args[0])}"  # Python's float is a double
        if name == "float32":
            return f"(float){self.operand(node.func.value)}"
        if name in _MATH:
            return f"{_MATH[name]}{'f' if kind == 't:float' else ''}({self.expr(node.args[0], want)})"
        if name == "sum":
            return self.hoist_sum(node, kind)
        self.refuse(node, f"calls {name}")

    def hoist_sum(self, node, kind):
        """sum(e for v in range(...)) as a loop before the statement, into a fresh accumulator."""
        gen = self.generator(node)
        name = f"sum{self.hoisted}"
        self.hoisted += 1
        want = kind if kind == "t:float" else None
        self.emit(f"{_c_type(kind)} {name} = 0;", node)
        head = self.range_head(gen.generators[0], node)
        self.emit(head + " {", node)
        self.scopes.append({gen.generators[0].target.id: INT})
        self.depth += 1
        self.emit(f"{name} += {self.expr(gen.elt, want)};", node)
        self.depth -= 1
        self.scopes.pop()
        self.emit("}", node)
        return name

    # ---- statements ----
    def emit(self, text, node=None):
        self.out.append("    " * self.depth + text)

    def range_head(self, comp, node):
        target, it = comp.target, comp.iter
        if not isinstance(target, ast.Name):
            self.refuse(node, "a for loop over several variables: CUDA loops over one int")
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and 1 <= len(it.args) <= 3 and not it.keywords):
            self.refuse(node, f"a for loop over {ast.unparse(it)}: CUDA loops count, `for v in range(a, b, step)`")
        args = [self.expr(a) for a in it.args]
        for a in it.args:
            if self.kind(a) != INT:
                self.refuse(node, "range() of something other than ints")
        start, stop = ("0", args[0]) if len(args) == 1 else (args[0], args[1])
        step = it.args[2] if len(args) == 3 else None
        v = target.id
        if step is None:
            return f"for (int {v} = {start}; {v} < {stop}; {v}++)"
        if not (isinstance(step, ast.Constant) or isinstance(step, ast.UnaryOp) and isinstance(step.operand, ast.Constant)):
            self.refuse(node, "a range whose step is not a constant: the loop's test (< or >) depends on its sign")
        negative = isinstance(step, ast.UnaryOp) or step.value < 0
        return f"for (int {v} = {start}; {v} {'>' if negative else '<'} {stop}; {v} += {args[2]})"

    def assign(self, target, value, node):
        if isinstance(target, ast.Name):
            if target.id in self.params or target.id in self.ids:
                self.refuse(node, f"assigns to the argument {target.id}: give the new value a name of its own")
            kind = self.kind(value)
            declared = self.lookup(target.id)
            if declared is None:
                if kind.startswith("ptr:"):
                    self.emit(f"{kind[4:]}* {target.id} = {self.expr(value)};", node)
                else:
                    later = self.later_kind(target.id, kind, node)
                    self.emit(f"{_c_type(later)} {target.id} = {self.expr(value, later)};", node)
                    kind = later
                self.scopes[-1][target.id] = kind
                self.closed.pop(target.id, None)
            else:
                self.emit(f"{target.id} = {self.expr(value, declared)};", node)
            return
        if isinstance(target, ast.Subscript):
            if isinstance(target.slice, ast.Slice):
                self.refuse(node, "assigns to a slice: a thread writes one element at a time")
            elem = self.kind(target)
            want = elem if elem == "t:float" else None
            self.emit(f"{self.expr(target)} = {self.expr(value, want)};", node)
            return
        self.refuse(node, _REFUSED.get(type(target), "assigns to something other than a name or one element"))

    def later_kind(self, name, kind, node):
        """The C type a new local needs: the join of every kind the function assigns to it (p = 0.0, then p += a float32)."""
        for n in ast.walk(self.tree):
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == name:
                try:
                    kind = _join(kind, _promote(kind, self.kind(n.value), type(n.op)))
                except CannotTranslate:
                    pass  # names not yet declared: the statement itself is translated (or refused) in its turn
        return kind

    def block(self, body):
        self.scopes.append({})
        self.depth += 1
        for stmt in body:
            self.stmt(stmt)
        self.depth -= 1
        for name in self.scopes.pop():
            self.closed[name] = self.line(body[0])

    def stmt(self, node):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                self.refuse(node, "a = b = value: assign one name at a time")
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Tuple):
                if not isinstance(value, ast.Tuple) or len(value.elts) != len(target.elts):
                    self.refuse(node, "unpacking a value that is not a tuple of the same length written out")
                names = {t.id for t in target.elts if isinstance(t, ast.Name)}
                if any(isinstance(n, ast.Name) and n.id in names for v in value.elts for n in ast.walk(v)):
                    self.refuse(node, "a, b = ... reading a or b: Python assigns both at once, C one after the other")
                for t, v in zip(target.elts, value.elts):
                    self.assign(t, v, node)
                return
            self.assign(target, value, node)
            return
        if isinstance(node, ast.AugAssign):
            op = type(node.op)
            if op not in _BINOPS or op in (ast.Div, ast.FloorDiv, ast.Mod):
                self.refuse(node, f"the augmented assignment {type(node.op).__name__}=: write it as x = x op y")
            target = node.target
            if isinstance(target, ast.Subscript):
                self.note(node, f"`{ast.unparse(node)}` reads, adds and writes: blk_kernel runs one thread at a time, "
                                "but on a GPU threads adding into the same element race and lose updates (atomicAdd)")
                kind = self.kind(target)
            elif isinstance(target, ast.Name):
                kind = self.lookup(target.id)
                if kind is None:
                    self.kind(target)  # refuses with the reason
            else:
                self.refuse(node, "an augmented assignment to something other than a name or one element")
            want = kind if kind == "t:float" else None
            self.emit(f"{self.expr(target)} {_BINOPS[op]}= {self.expr(node.value, want)};", node)
            return
        if isinstance(node, ast.If):
            self.emit(f"if {self.condition(node.test)} {{", node)
            self.block(node.body)
            orelse = node.orelse
            while len(orelse) == 1 and isinstance(orelse[0], ast.If):
                self.emit(f"}} else if {self.condition(orelse[0].test)} {{", orelse[0])
                self.block(orelse[0].body)
                orelse = orelse[0].orelse
            if orelse:
                self.emit("} else {", node)
                self.block(orelse)
            self.emit("}", node)
            return
        if isinstance(node, ast.For):
            if node.orelse:
                self.refuse(node, "for ... else: C has no else on loops")
            self.emit(self.range_head(node, node) + " {", node)
            self.scopes.append({node.target.id: INT})
            self.block(node.body)
            self.scopes.pop()
            self.emit("}", node)
            return
        if isinstance(node, ast.While):
            if node.orelse:
                self.refuse(node, "while ... else: C has no else on loops")
            self.emit(f"while {self.condition(node.test)} {{", node)
            self.block(node.body)
            self.emit("}", node)
            return
        if isinstance(node, ast.Return):
            if node.value is not None:
                self.refuse(node, "returns a value: a kernel returns nothing; write the result into an output tensor")
            self.emit("return;", node)
            return
        if isinstance(node, (ast.Break, ast.Continue)):
            self.emit("break;" if isinstance(node, ast.Break) else "continue;", node)
            return
        if isinstance(node, ast.Pass):
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if self.shared and isinstance(call.func, ast.Name) and call.func.id == self.sync_name and not call.args:
                self.emit("__syncthreads();", node)
                return
            if isinstance(call.func, ast.Name) and call.func.id == "print":
                self.print(call, node)
                return
            self.refuse(node, "a call whose value is thrown away: only syncthreads() and print() stand alone")
        self.refuse(node, _REFUSED.get(type(node), f"{type(node).__name__}: not a kernel's Python"))

    def condition(self, test):
        text = self.expr(test)
        parenthesized = isinstance(test, ast.BoolOp) or isinstance(test, ast.Compare) and len(test.ops) > 1
        return text if parenthesized else f"({text})"

    def print(self, call, node):
        if call.keywords:
            self.refuse(node, "print with keyword arguments: printf takes a format and values")
        fmt, values = [], []
        for a in call.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                fmt.append(a.value.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"'))
                continue
            kind = self.kind(a)
            if kind.startswith("ptr:"):
                self.refuse(node, "print of a whole tensor: a thread prints numbers")
            fmt.append("%f" if _float_kind(kind) else "%d")
            values.append(f"(double){self.operand(a)}" if _float_kind(kind) else f"(int){self.operand(a)}")
        args = "".join(", " + v for v in values)
        self.emit(f'printf("{" ".join(fmt)}\\n"{args});', node)

    # ---- the whole kernel ----
    def translate(self):
        name = self.tree.name
        self.depth = 1
        for stmt in self.tree.body:
            self.stmt(stmt)
        if self.products:
            lines = sorted(set(self.products.values()))
            self.notes.append(f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}: "
                              f"{', '.join(f'`{t}`' for t in self.products)} {'are' if len(self.products) > 1 else 'is'} "
                              f"int arithmetic in C: past {INT32_MAX:,} it wraps around where Python's int grows "
                              "(make one factor a long long for tensors that large)")
        params = [f"{elem}* {p}" if kind == "ptr" else f"{kind} {p}" for p, (kind, elem) in self.params.items()]
        head = f"__global__ void {name}_kernel({', '.join(params)}) {{"
        shared = ["    extern __shared__ float " + self.shared_name + "[];"] if self.shared else []
        kernel = "\n".join([head, *shared, *self.out, "}"]) + "\n"
        grid = "std::vector<int64_t> blocks, std::vector<int64_t> threads" if self.two_d else "int blocks, int threads"
        extra = ", int sh_sz" if self.shared else ""
        args = [f"torch::Tensor {p}" if kind == "ptr" else f"{kind} {p}" for p, (kind, _) in self.params.items()]
        signature = f"void {name}({grid}{extra}{''.join(', ' + a for a in args)})"
        tensors = [p for p, (kind, _) in self.params.items() if kind == "ptr"]
        body = [f"    CHECK_INPUT({p});" for p in tensors]
        if self.two_d:
            body += ["    TORCH_CHECK(blocks.size() >= 1 && blocks.size() <= 3 && threads.size() >= 1 && threads.size() <= 3,",
                     '                "blocks and threads must be dim3s (or tuples of 1 to 3 ints)");',
                     "    dim3 grid(blocks[0], blocks.size() > 1 ? blocks[1] : 1, blocks.size() > 2 ? blocks[2] : 1);",
                     "    dim3 tpb(threads[0], threads.size() > 1 ? threads[1] : 1, threads.size() > 2 ? threads[2] : 1);",
                     "    if (grid.x*grid.y*grid.z == 0) return;  // blk_kernel runs no block: CUDA refuses the launch"]
            launch = "grid, tpb"
        else:
            body += ["    if (blocks == 0) return;  // blk_kernel runs no block: CUDA refuses the launch"]
            launch = "blocks, threads"
        if self.shared:
            launch += ", sh_sz*sizeof(float)"
        call = [f"{p}.data_ptr<{elem}>()" if kind == "ptr" else p for p, (kind, elem) in self.params.items()]
        body += [f"    {name}_kernel<<<{launch}>>>({', '.join(call)});", "    C10_CUDA_KERNEL_LAUNCH_CHECK();"]
        wrapper = "\n".join([signature + " {", *body, "}"]) + "\n"
        return Translation(kernel, wrapper, signature + ";", name, tuple(self.notes))


def to_cuda(kernel, *example_args):
    """The CUDA C of a Python kernel for blk_kernel, blk_kernel2d or blk_kernel2d_shar, and a wrapper launching it with the runner's blocks and threads (taught in drills/09)."""
    if not callable(kernel):
        raise TypeError(f"pass the kernel function itself, e.g. to_cuda(rgb2grey_bk, x, out, n), not {kernel!r}")
    try:
        inspect.getsourcelines(kernel)
    except (OSError, TypeError):
        raise CannotTranslate(f"the source of {getattr(kernel, '__name__', kernel)} cannot be read: define it with "
                              "def in a file or a notebook cell") from None
    return _Kernel(kernel, example_args).translate()

"""The wire between a process that runs student code and the judge: plain data, read against a schema.

A check's child runs the student's function and reports a Result; the judge reads it, and a Job, in a process of its
own. Anything such a child writes can be forged by the student's code (a C++ wrapper through pybind11, a Triton launch
function), so nothing read here is an object that runs code when read: a file is PyTorch's weights-only format
holding {"wire", "kind", "json", "tensors"}, read only with torch.load(weights_only=True) (tensors, lists, dicts,
strings, numbers; never an object of a class the file names); "json" is the record as JSON text, each tensor in it
a {"tensor": k} into "tensors". Reading checks the record against its class's fields and their annotations (the
schema: names, types, tensor dtypes) and raises Unreadable for anything else; the judge then fails the check, never
passes it.

In the JSON: a tuple is {"tuple": [...]}, a dict {"dict": {...}} (string keys), a record {"record": {field: ...}},
a value no schema allows {"opaque": type name} (read back as an empty object of a class with that name, so a
verdict can say what was returned); lists, strings, numbers, booleans and null are themselves.
"""
import dataclasses
from dataclasses import dataclass, field
from typing import Optional
import hashlib
import io
import json
import os
import re
import stat
import typing
import zipfile

import torch

VERSION = 1
DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                    torch.bfloat16, torch.float32, torch.float64})
LIMIT = 4 << 30  # bytes a child's report may hold (outputs of the largest cases, twice, are well under 1 GiB)
DEPTH = 16  # how deep a value may nest (a tuple of tuples ...)
TAGS = ("tensor", "tuple", "dict", "record", "opaque")
_SCALARS = (type(None), bool, int, float, str)


class Unreadable(Exception):
    """A file on the wire that is not the plain data its schema allows: the judge fails the check with this."""


class Plain:
    """The annotation of a field that holds any plain value: a tensor, a number, a string, None, or a tuple, list or
    dict (string keys) of them."""


def _opaque(name):
    """An object standing for a value the wire does not carry: only its type's name is kept."""
    return type(name, (), {"__repr__": lambda self: f"<{type(self).__name__}>"})()


# ---- writing ------------------------------------------------------------------------------------------------------

def _encode(value, tensors, depth=0):
    if depth > DEPTH:
        raise ValueError("a value nested too deep for the wire")
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if type(tensor) is not torch.Tensor:
            tensor = tensor.as_subclass(torch.Tensor)
        if tensor.dtype not in DTYPES or tensor.layout != torch.strided:
            return {"opaque": f"Tensor of {tensor.dtype}, {tensor.layout}"}
        tensors.append(tensor)
        return {"tensor": len(tensors) - 1}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"record": {f.name: _encode(getattr(value, f.name), tensors, depth + 1)
                           for f in dataclasses.fields(value)}}
    if type(value) is tuple:
        return {"tuple": [_encode(v, tensors, depth + 1) for v in value]}
    if type(value) is list:
        return [_encode(v, tensors, depth + 1) for v in value]
    if type(value) is dict and all(type(k) is str for k in value):
        return {"dict": {k: _encode(v, tensors, depth + 1) for k, v in value.items()}}
    if type(value) in _SCALARS:
        return value
    return {"opaque": type(value).__name__}


def dumps(record):
    """A record (a dataclass: Job, Result, a speed test's Timed) as the wire's bytes."""
    tensors = []
    text = json.dumps(_encode(record, tensors))
    buf = io.BytesIO()
    torch.save({"wire": VERSION, "kind": type(record).__name__, "json": text, "tensors": tensors}, buf)
    return buf.getvalue()


def write(record, path):
    """Writes a record to path (whole, or not at all); returns the sha256 of the bytes written."""
    data = dumps(record)
    tmp = f"{path}.writing"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


# ---- reading -------------------------------------------------------------------------------------------------------

def _fail(at, what):
    raise Unreadable(f"{at or 'the record'}: {what}")


def _tag(node, at):
    """(tag, content) of a tagged JSON object, or (None, node) for anything else."""
    if isinstance(node, dict):
        if len(node) != 1 or next(iter(node)) not in TAGS:
            _fail(at, f"an object with the keys {sorted(node)[:5]}, not one of {', '.join(TAGS)}")
        return next(iter(node.items()))
    return None, node


def _tensor(content, tensors, at):
    if type(content) is not int or not 0 <= content < len(tensors):
        _fail(at, f"a tensor reference {content!r} to no tensor of the file's {len(tensors)}")
    return tensors[content]


def _plain(node, tensors, at, depth=0):
    """Any plain value (a Plain field's)."""
    if depth > DEPTH:
        _fail(at, "a value nested too deep")
    tag, content = _tag(node, at)
    if tag == "tensor":
        return _tensor(content, tensors, at)
    if tag == "tuple" and isinstance(content, list):
        return tuple(_plain(v, tensors, f"{at}[{k}]", depth + 1) for k, v in enumerate(content))
    if tag == "dict" and isinstance(content, dict):
        return {k: _plain(v, tensors, f"{at}[{k!r}]", depth + 1) for k, v in content.items()}
    if tag == "opaque" and isinstance(content, str) and re.fullmatch(r"[\w ,.]{1,80}", content):
        return _opaque(re.sub(r"\W", "_", content))
    if tag is not None:
        _fail(at, f"a malformed {tag}")
    if isinstance(node, list):
        return [_plain(v, tensors, f"{at}[{k}]", depth + 1) for k, v in enumerate(node)]
    if type(node) in _SCALARS:
        return node
    _fail(at, f"a {type(node).__name__}")


def _read(node, hint, tensors, at, depth=0):
    """node (JSON, decoded) as the type hint says, or Unreadable."""
    if depth > DEPTH:
        _fail(at, "a value nested too deep")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Plain or hint is typing.Any or hint in (list, dict, tuple):
        value = _plain(node, tensors, at, depth)
        if hint in (list, dict, tuple) and not isinstance(value, hint):
            _fail(at, f"a {type(value).__name__}, expected a {hint.__name__}")
        return value
    if origin is typing.Union:
        if node is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        if len(arms) != 1:
            raise TypeError(f"the wire reads unions of one type and None only, not {hint}")
        return _read(node, arms[0], tensors, at, depth)
    if dataclasses.is_dataclass(hint):
        tag, content = _tag(node, at)
        if tag != "record" or not isinstance(content, dict):
            _fail(at, f"not a {hint.__name__} record")
        fields = {f.name: f for f in dataclasses.fields(hint)}
        if set(content) != set(fields):
            extra, missing = sorted(set(content) - set(fields)), sorted(set(fields) - set(content))
            _fail(at, f"a {hint.__name__} with " + "; ".join(
                ([f"fields it does not have: {', '.join(extra[:5])}"] if extra else []) +
                ([f"fields missing: {', '.join(missing[:5])}"] if missing else [])))
        hints = typing.get_type_hints(hint)
        values = {}
        for name, f in fields.items():
            field_hint = hints.get(name, Plain)
            if content[name] is None and f.default is None:  # `x: str = None`: None is what it holds until set
                values[name] = None
            else:
                values[name] = _read(content[name], field_hint, tensors, f"{at}.{name}" if at else name, depth + 1)
        return hint(**values)
    if hint is torch.Tensor:
        tag, content = _tag(node, at)
        if tag != "tensor":
            _fail(at, "not a tensor")
        return _tensor(content, tensors, at)
    if hint is float:
        if type(node) not in (int, float):
            _fail(at, f"a {type(node).__name__}, expected a number")
        return float(node)
    if hint in (str, int, bool):
        if type(node) is not hint:
            _fail(at, f"a {type(node).__name__}, expected a {hint.__name__}")
        return node
    if hint is type(None):
        if node is not None:
            _fail(at, "expected nothing (None)")
        return None
    if origin is list:
        if not isinstance(node, list):
            _fail(at, f"a {type(node).__name__}, expected a list")
        return [_read(v, args[0] if args else Plain, tensors, f"{at}[{k}]", depth + 1) for k, v in enumerate(node)]
    if origin is tuple:
        tag, content = _tag(node, at)
        if tag != "tuple" or not isinstance(content, list):
            _fail(at, "expected a tuple")
        if len(args) == 2 and args[1] is Ellipsis:
            kinds = [args[0]] * len(content)
        elif len(args) != len(content):
            _fail(at, f"a tuple of {len(content)}, expected {len(args)}")
        else:
            kinds = list(args)
        return tuple(_read(v, h, tensors, f"{at}[{k}]", depth + 1) for k, (v, h) in enumerate(zip(content, kinds)))
    if origin is dict:
        tag, content = _tag(node, at)
        if tag != "dict" or not isinstance(content, dict):
            _fail(at, "expected a dict")
        return {k: _read(v, args[1] if args else Plain, tensors, f"{at}[{k!r}]", depth + 1) for k, v in content.items()}
    if origin is typing.Literal:
        if node not in args or type(node) not in _SCALARS:
            _fail(at, f"{node!r}, expected one of {', '.join(map(repr, args))}")
        return node
    raise TypeError(f"the wire has no reader for {hint}")


def loads(data, kind):
    """The record of class kind in data (the wire's bytes), checked against kind's fields; Unreadable otherwise."""
    if not zipfile.is_zipfile(io.BytesIO(data)):  # only the zip format: PyTorch's legacy formats are not read at all
        raise Unreadable("not a file in the check's format (PyTorch's zip format)")
    try:
        top = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as e:  # noqa: B902 (whatever the reader refuses: an object that is not plain data)
        raise Unreadable(f"not plain data ({type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''})") from None
    if type(top) is not dict or set(top) != {"wire", "kind", "json", "tensors"} or type(top["wire"]) is not int \
            or type(top["kind"]) is not str:
        raise Unreadable("not a record of the check's format")
    if top["wire"] != VERSION or top["kind"] != kind.__name__:
        raise Unreadable(f"a {top['kind']!r} of format {top['wire']!r}, expected a {kind.__name__!r} of format {VERSION}")
    tensors = top["tensors"]
    if type(tensors) is not list or type(top["json"]) is not str:
        raise Unreadable("not a record of the check's format")
    for k, t in enumerate(tensors):
        if type(t) is not torch.Tensor or t.dtype not in DTYPES or t.layout != torch.strided or t.requires_grad:
            raise Unreadable(f"tensor {k} is a {type(t).__name__} the check does not read"
                             + (f" ({t.dtype})" if isinstance(t, torch.Tensor) else ""))
    try:
        node = json.loads(top["json"])
    except (ValueError, RecursionError) as e:
        raise Unreadable(f"its JSON does not parse ({type(e).__name__})") from None
    try:
        return _read(node, kind, tensors, "")
    except RecursionError:
        raise Unreadable("a value nested too deep") from None


def taken(path, limit=LIMIT):
    """The bytes of a file a child wrote, taken out of its folder: a regular file of at most limit bytes, not a link
    (which could point anywhere) nor a pipe (which could hang the reader); Unreadable otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise Unreadable(f"the result file could not be opened ({e.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("the result is not a plain file")
        if info.st_size > limit:
            raise Unreadable(f"the result holds {info.st_size:,} bytes, more than the {limit:,} the check reads")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise Unreadable(f"the result holds more than the {limit:,} bytes the check reads")
        return data
    finally:
        os.close(fd)


def read(path, kind, sha256=None):
    """The record of class kind in the file at path; sha256: the digest write() returned, which the bytes must have
    (a file the judge wrote for itself, that no other process may have changed). Unreadable for anything else."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Unreadable(f"{path} could not be read ({e.strerror})") from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise Unreadable("the file is not the one the check wrote")
    return loads(data, kind)


# The profiler ranges a child's events name a launch by (Run.events; integrity.py reads them)
CPU_LAUNCH, CPU_SHARED = "cuda_cpu_launch::", "cuda_cpu_shared::"
TRITON_LAUNCH = "triton_launch::"  # the range around each launch of a student's @triton.jit kernel
LAUNCHES = (CPU_LAUNCH, TRITON_LAUNCH)  # ranges named after the student's kernel: a launch of their own


# ---- the records a check's child reads (Job) and writes (Result): their fields and types are the schema ----------

@dataclass
class Job:
    """One check's work for the child: which function of which module, on which inputs, how (wire.py: its fields and
    their types are the schema it is read against)."""
    module: str                  # the compiled module's file
    func: str
    inputs: list[tuple]          # one tuple of arguments per call
    fills: list[tuple[int, int]]  # (bytes, byte) per call: the output's memory holds byte before the kernel runs
    mode: str                    # run, memory, race or integrity
    cpu: bool                    # CPU mode: course/harness/memory.cpp stands in for the GPU's memory
    memory_module: Optional[str] = None  # that allocator, built
    exercise: Optional[tuple[str, str]] = None  # (topic module, exercise name): how the judge finds the Exercise
    wheres: Optional[list[str]] = None  # how messages name each input
    needs_shared: bool = False   # integrity: the kernel must use shared memory (the tiled exercises)
    memory_hint: Optional[str] = None  # what to say when the memory check finds an access outside a tensor
    timing: Optional[tuple[int, int]] = None  # mode "time": (warm-up calls, timed calls) for course.timing.cuda_time
    element: Optional[int] = None  # mode "origin": the wrong output element whose origin harness/origin.py looks for
    loader: Optional[str] = None  # "module:function" giving (job) -> the function to call; None: import the compiled module
    verdict: str = "course.harness.cuda:verdict"  # "module:function" that judges (job, Result), in judge.judge
    task: str = "run"            # the child's function that runs the job: run, or speed (harness/speed.py)
    speed: Optional[dict] = None  # mode "speed": the rung, the contenders timed, the stopping rule
    repeat: int = 1              # task "record": calls in all, on the inputs in turn


@dataclass
class Run:
    """What one call returned (on the CPU) and what it did."""
    value: Plain
    device: Optional[str] = None
    contiguous: Optional[bool] = None
    input_changed: bool = False
    again: Plain = None          # integrity and race: the output of a second run on the same input
    events: list[tuple[str, str]] = field(default_factory=list)  # integrity: (kind, name) of what the profiler saw


@dataclass
class Result:
    """Every call's Run, or the error the function raised."""
    error: Optional[str] = None
    runs: list[Run] = field(default_factory=list)


VERDICTS = re.compile(r"course\.harness\.\w+:verdict")  # the judges a Job may name


def unreadable(func, error):
    """The verdict on a child's report the judge cannot read as plain data: the check fails, saying why."""
    return (f"{func}: the check could not read your function's results ({error}): the process that ran your function "
            "reported something other than plain data (tensors, numbers, text), so nothing it reported counts.\nHint: "
            "return the output tensor(s) and leave the check's machinery alone (code that patches torch.save, the "
            "profiler or the course in the process running it is seen here).")


@dataclass
class Timed:
    """A speed test's child's report: each contender's times, or the first wrong output, or the error raised."""
    times: dict = field(default_factory=dict)
    wrong: dict = None
    error: str = None
    settled: bool = False
    stopped: str = None
    where: str = ""
    clock: str = ""
    gpu: dict = field(default_factory=dict)
    lock_wait_s: float = 0.0


@dataclass
class Recorded:
    """A speed test's record child's report (harness/record.py): what each call launched, and where its inputs, its
    output and the allocator's blocks lay; or why nothing was recorded."""
    calls: list = field(default_factory=list)
    error: str = None             # the function raised this
    unsplit: str = None           # the module has no stubs that note launches (why it was built as one unit)


RESULTS = {"speed": Timed, "record": Recorded}  # what a task's child reports, where it is not a Result

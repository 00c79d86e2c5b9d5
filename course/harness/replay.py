"""The speed test's replay: a student's recorded launches, launched again by the course where no student host code runs.

A speed test (harness/speed.py) times device code only. record.py ran the student's function twice in a sandboxed
child and reported what it launched; plan() (the judge's side) maps each pointer argument to what it points into
(an input, the output, a workspace the allocator held) and refuses what the replay cannot time: a launch sequence
that differs between the two inputs, a pointer into nothing it knows, a struct argument that holds one. The timing
process then builds a Replay from the plan and launches it with its own inputs, output and workspaces, each call:

- CUDA on a GPU: the module's device code (the .nv_fatbin section of the file the checks judged, cubin and PTX, no
  host code) loaded with the driver's cuModuleLoadData, each kernel found by its mangled name, launched with
  cuLaunchKernel on the current stream with the recorded grid, block, shared memory and argument bytes.
- CUDA in CPU mode (tests only): the module is imported there (its static initializers run: CPU mode's kernels are
  host code anyway) and each launch goes through its table of stubs (course_replay), never through the wrapper.
- Triton: the answer's file is read as text and only what a kernel needs is run: imports of torch, triton and math,
  constants that are literals, and functions whose only decorator is triton.jit with literal defaults and
  annotations; the launch function is never defined. Each recorded launch is then kernel[grid](*args, **options).

What the student's host code did besides launching (allocating, filling, copying) is not replayed, so not timed:
the output and each workspace are new memory holding the byte the check's fill left there (what torch::empty
gives in a check), or zeros where the kernels need them (torch::zeros), chosen at the first call and kept.
"""
import ast
import ctypes
import os
import struct
import sys
import types

import torch

from . import record

CAN_TIME = ("the speed test times your kernels' launches again, the same ones for every input: launches that "
            "depend on the inputs' values, or pointer arguments that point into memory other than the inputs, the "
            "output and workspaces your function allocated with torch, cannot be timed")


class Refused(AssertionError):
    """A launch sequence the replay cannot time; the message says what it can."""


# ---- the judge's side: a record as a plan ----------------------------------------------------------------------

def _regions(call):
    found = [("in", k, s) for k, s in enumerate(call["inputs"]) if s is not None]
    return found + [("out", None, call["output"]["span"])]


def _inside(p, span):
    start, size = span
    return start <= p < start + size or (size == 0 and p == start)


def _pointer(p, call, work):
    """Where pointer p points: ["in", k, offset], ["out", offset], ["work", j, offset] or ["null"]; None for nowhere."""
    if p == 0:
        return ["null"]
    for kind, k, span in _regions(call):
        if _inside(p, span):
            return ["in", k, p - span[0]] if kind == "in" else ["out", p - span[0]]
    for address, size in call["blocks"]:
        if _inside(p, (address, size)):
            if address not in work:
                work[address] = (len(work), size)
            return ["work", work[address][0], p - address]
    return None


def _holds_pointer(data, call):
    """Whether an argument's bytes hold, in an aligned 8-byte word, an address inside a region or block."""
    spans = [s for _, _, s in _regions(call)] + call["blocks"]
    for i in range(0, len(data) - 7, 8):
        word = struct.unpack_from("<Q", data, i)[0]
        if word and any(_inside(word, s) for s in spans):
            return True
    return False


def _cuda_launch(launch, call, work, cpu):
    if launch["stream"] not in (0, call["stream"]):
        raise Refused("a launch on a stream of its own (the speed test times work on the current stream)")
    args = []
    for kind, size, hexed in launch["args"]:
        data = bytes.fromhex(hexed)
        if kind == "p":
            where = _pointer(int.from_bytes(data, "little"), call, work) if size == 8 else None
            if where is None:
                raise Refused(f"{launch['name']}: a pointer argument points into memory the speed test does not know")
            args.append(["p", where])
        else:
            if _holds_pointer(data, call):
                raise Refused(f"a launch passes an address inside a value of {size} bytes (a struct or an integer)")
            args.append(["s", hexed])
    if not cpu and launch["name"] in ("", "-"):
        raise Refused("a launch whose kernel the speed test cannot name in the module's device code")
    if cpu and launch["entry"] < 0:
        raise Refused("a launch of a kernel that is not in the module's table")
    return {"entry": launch["entry"], "name": launch["name"], "dims": launch["dims"], "args": args}


def _triton_launch(launch, call, work):
    args = []
    for name, value in launch["args"]:
        if "ptr" in value:
            where = _pointer(value["ptr"], call, work)
            if where is None or where == ["null"]:
                raise Refused(f"{launch['kernel']}: the tensor passed as {name} is not an input, the output or a "
                              "workspace your function allocated")
            args.append([name, {"at": where, "dtype": value["dtype"]}])
        elif "value" in value:
            args.append([name, value])
        else:
            raise Refused(f"{launch['kernel']}: {name} is a {value.get('opaque')}, which the speed test cannot pass again")
    for key, value in launch["options"].items():
        if "value" not in value:
            raise Refused(f"{launch['kernel']}: the launch option {key} is not a number or a string")
    return {"kernel": launch["kernel"], "grid": launch["grid"], "args": args,
            "options": {k: v["value"] for k, v in launch["options"].items()}}


DIFFERED = "your function launched other kernels, grids or arguments on call"


def plan_call(call, triton, cpu, first=True):
    """One recorded call as a plan: its launches with every pointer mapped, the output's form, the workspaces' sizes."""
    work = {}
    launches = [_triton_launch(l, call, work) if triton else _cuda_launch(l, call, work, cpu) for l in call["launches"]]
    if not launches and first:
        raise Refused("your function launched no kernel of its own")
    out = call["output"]
    return {"launches": launches, "output": {k: out[k] for k in ("shape", "stride", "dtype")},
            "output_bytes": out["span"][1], "work": [size for _, size in sorted(work.values())]}


def plan(recorded, triton, cpu):
    """The replay's plan from a record of calls on different inputs of one size (Recorded); Refused when they differ."""
    first = plan_call(recorded.calls[0], triton, cpu)
    for k, call in enumerate(recorded.calls[1:], 2):
        if plan_call(call, triton, cpu, first=False) != first:
            raise Refused(f"{DIFFERED} {k} than on the first (each call on fresh inputs of the same size)")
    return first


def verdict(job, result):
    """The judge's verdict on a record child's report: the plan (the record's "plan"), or AssertionError saying why
    the speed test cannot time the function."""
    func = job.func
    if result.error:
        raise AssertionError(f"{func}: running your function raised an error before it was timed:\n  {result.error}")
    if result.unsplit:
        raise Refused(f"{func}: the speed test times the kernels your wrapper launches, and your source was built as "
                      f"one unit ({result.unsplit}), so its launches cannot be recorded. Hint: launch each kernel "
                      "from the wrapper as `kernel<<<blocks, threads>>>(...)`.")
    try:
        return plan(result, bool(job.loader), job.cpu)
    except Refused as e:
        raise Refused(f"{func}: {e}.\nHint: {CAN_TIME}.") from None
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise AssertionError(f"{func}: the record of your function's launches could not be read ({type(e).__name__}: "
                             f"{e}), so nothing can be timed") from None


# ---- the timing side: device code launched from a plan ---------------------------------------------------------

FATBIN_MAGIC = 0xBA55ED50


def fatbins(path):
    """The fatbinaries in an ELF file's .nv_fatbin section (a module's device code), each as bytes."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise Refused("the module is not a 64-bit ELF file")
    try:
        found = _fatbins(data)
    except (struct.error, IndexError, ValueError, UnicodeDecodeError):
        raise Refused("the module's sections cannot be read") from None
    if not found:
        raise Refused("the module holds no device code")
    return found


def _fatbins(data):
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
    names = sections[shstrndx]
    found = []
    for s in sections:
        start = names[4] + s[0]
        name = data[start:data.index(b"\0", start)].decode()
        if name == ".nv_fatbin":
            section = data[s[4]:s[4] + s[5]]
            at = 0
            while at + 16 <= len(section):
                magic, _, header, size = struct.unpack_from("<IHHQ", section, at)
                if magic != FATBIN_MAGIC:
                    at += 8  # padding between objects' fatbinaries
                    continue
                found.append(section[at:at + header + size])
                at += header + size
    return found


class _Driver:
    """The CUDA driver API, through ctypes: what a replay needs of it."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                                            ctypes.c_void_p, ctypes.c_void_p]

    def check(self, code, what):
        if code != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(code, ctypes.byref(text))
            raise RuntimeError(f"{what}: CUDA driver error {code} ({(text.value or b'').decode()})")

    def functions(self, images, names):
        """name -> CUfunction, from the first fatbinary that holds every name (each kept loaded)."""
        for image in images:
            module = ctypes.c_void_p()
            buffer = ctypes.create_string_buffer(image, len(image))
            if self.lib.cuModuleLoadData(ctypes.byref(module), buffer) != 0:
                continue
            found = {}
            for name in names:
                f = ctypes.c_void_p()
                if self.lib.cuModuleGetFunction(ctypes.byref(f), module, name.encode()) == 0:
                    found[name] = f
            if len(found) == len(names):
                self.kept = (buffer, module)
                return found
        raise Refused("the module's device code does not hold the kernels your function launched")


class Replay:
    """A plan's launches, again, on new inputs: prepare(args) gives the call the timing times (it returns the output)."""

    def __init__(self, plan, module, cpu, triton):
        self.plan, self.cpu, self.triton = plan, cpu, triton
        self.dev = "cpu" if cpu else "cuda"
        if triton:
            self.kernels = checked_kernels(module, cpu)
            missing = {l["kernel"] for l in plan["launches"]} - set(self.kernels)
            if missing:
                raise Refused(f"the speed test found no @triton.jit kernel named {', '.join(sorted(missing))}")
            return
        self.bufs = [[self._scalar(a) for a in l["args"]] for l in plan["launches"]]
        self.params = [(ctypes.c_void_p * max(1, len(b)))(*[ctypes.addressof(x) for x in b]) for b in self.bufs]
        if cpu:
            from course.toolchain.load import import_compiled
            import_compiled(module)
            self.lib = ctypes.CDLL(module)
            self.lib.course_replay.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p]
            self.dims = [(ctypes.c_uint * 6)(*l["dims"][:6]) for l in plan["launches"]]
        else:
            self.driver = _Driver()
            funcs = self.driver.functions(fatbins(module), sorted({l["name"] for l in plan["launches"]}))
            self.funcs = [funcs[l["name"]] for l in plan["launches"]]
            for f, l in zip(self.funcs, plan["launches"]):
                if l["dims"][6] > 48 * 1024:  # what the wrapper's cudaFuncSetAttribute did (host code, not replayed)
                    self.driver.check(self.driver.lib.cuFuncSetAttribute(f, 8, ctypes.c_int(l["dims"][6])),
                                      "setting a kernel's shared memory")

    @staticmethod
    def _scalar(arg):
        if arg[0] == "s":
            data = bytes.fromhex(arg[1])
            return ctypes.create_string_buffer(data, max(1, len(data)))
        return ctypes.c_uint64(0)

    def _memory(self, args, fill):
        out = self.plan["output"]
        dtype = getattr(torch, out["dtype"])
        nbytes = max(self.plan["output_bytes"], 1)
        nbytes += -nbytes % torch.empty(0, dtype=dtype).element_size()
        base = torch.full((nbytes,), fill, dtype=torch.uint8, device=self.dev)
        y = base.view(dtype).as_strided(out["shape"], out["stride"])
        work = [torch.full((max(size, 1),), fill, dtype=torch.uint8, device=self.dev) for size in self.plan["work"]]
        return y, base, work

    @staticmethod
    def _address(where, args, base, work):
        if where[0] == "null":
            return 0
        if where[0] == "in":
            return args[where[1]].data_ptr() + where[2]
        if where[0] == "out":
            return base.data_ptr() + where[1]
        return work[where[1]].data_ptr() + where[2]

    def prepare(self, args, fill):
        """The memory of one call (untimed) and the call itself: launch() queues every launch and returns the output."""
        y, base, work = self._memory(args, fill)
        if self.triton:
            calls = [(self.kernels[l["kernel"]][tuple(l["grid"])],
                      [self._tensor(v["at"], v["dtype"], args, base, work) if "at" in v else v["value"]
                       for _, v in l["args"]], l["options"]) for l in self.plan["launches"]]

            def launch():
                for kernel, values, options in calls:
                    kernel(*values, **options)
                return y
            return launch
        for bufs, l in zip(self.bufs, self.plan["launches"]):
            for buf, arg in zip(bufs, l["args"]):
                if arg[0] == "p":
                    buf.value = self._address(arg[1], args, base, work)
        keep = (base, work)

        def launch(_keep=keep):
            if self.cpu:
                for l, dims, params in zip(self.plan["launches"], self.dims, self.params):
                    if self.lib.course_replay(l["entry"], dims, l["dims"][6], params) != 0:
                        raise RuntimeError("a recorded launch names no kernel of the module")
            else:
                stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
                for f, l, params in zip(self.funcs, self.plan["launches"], self.params):
                    g, b = l["dims"][:3], l["dims"][3:6]
                    self.driver.check(self.driver.lib.cuLaunchKernel(f, *g, *b, l["dims"][6], stream, params, None),
                                      "launching your kernel")
            return y
        return launch

    def _tensor(self, where, dtype, args, base, work):
        kind = getattr(torch, dtype)
        if where[0] == "in" and where[2] == 0 and args[where[1]].dtype == kind:
            return args[where[1]]
        region = {"in": lambda: args[where[1]], "out": lambda: base, "work": lambda: work[where[1]]}[where[0]]()
        offset = where[-1]
        raw = region.reshape(-1).view(torch.uint8)[offset:]
        size = torch.empty(0, dtype=kind).element_size()
        return raw[:len(raw) - len(raw) % size].view(kind)


# ---- Triton: the kernels of an answer's file, and nothing else of it ----------------------------------------------

IMPORTS = {"torch", "triton", "triton.language", "math"}
DECORATORS = {"triton.jit", "jit"}


def _literal(node):
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _constexpr_of_literal(node):
    return (isinstance(node, ast.Call) and ast.unparse(node.func) in ("tl.constexpr", "triton.language.constexpr")
            and len(node.args) == 1 and not node.keywords and _literal(node.args[0]))


def _kernel_ok(node):
    """Why a decorated function cannot be defined in the timing process (None when it can)."""
    for d in node.decorator_list:
        call = d if isinstance(d, ast.Call) else None
        name = ast.unparse(call.func if call else d)
        if name not in DECORATORS:
            return f"its decorator {name} (the speed test compiles kernels decorated with @triton.jit alone)"
        if call and (call.args or not all(_literal(k.value) for k in call.keywords)):
            return "@triton.jit(...) with arguments that are not literals"
    a = node.args
    for default in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
        if not _literal(default):
            return f"the default value {ast.unparse(default)}, which is not a literal"
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                *([a.kwarg] if a.kwarg else [])]:
        if arg.annotation is not None and ast.unparse(arg.annotation) not in ("tl.constexpr", "triton.language.constexpr",
                                                                              "constexpr"):
            return f"the annotation {ast.unparse(arg.annotation)} of {arg.arg}"
    if node.returns is not None:
        return "a return annotation"
    return None


def kernel_statements(text):
    """The statements of an answer's file the timing process runs: imports, literal constants, checked kernels."""
    tree = ast.parse(text)
    keep = []
    for node in tree.body:
        if isinstance(node, ast.Import) and all(n.name in IMPORTS for n in node.names):
            keep.append(node)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in IMPORTS \
                and all(n.name != "*" for n in node.names) and \
                all(f"{node.module}.{n.name}" in IMPORTS or node.module == "triton" and n.name in ("jit", "language")
                    or node.module == "triton.language" for n in node.names):
            keep.append(node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and (_literal(node.value) or _constexpr_of_literal(node.value)):
            keep.append(node)
        elif isinstance(node, ast.FunctionDef) and node.decorator_list and any(
                "jit" in ast.unparse(d) or "autotune" in ast.unparse(d) or "heuristics" in ast.unparse(d)
                for d in node.decorator_list):
            why = _kernel_ok(node)
            if why:
                raise Refused(f"the kernel {node.name} cannot be compiled for the speed test: {why}")
            keep.append(node)
    return ast.Module(body=keep, type_ignores=[])


def checked_kernels(path, cpu):
    """The @triton.jit kernels of an answer's file, defined from its checked statements alone: name -> kernel."""
    if cpu:
        os.environ["TRITON_INTERPRET"] = "1"
    with open(path) as f:
        text = f.read()
    code = compile(kernel_statements(text), path, "exec")  # the file's own lines: Triton reads a kernel's source there
    name = "course_replay_" + record.module_name(path)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(code, module.__dict__)
    return record.kernels_of(module)

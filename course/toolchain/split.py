"""The split build: a student's one cuda_src as two units, so an edit recompiles only what changed.

The kernels, their __device__ helpers, templates and __constant__ data go into a CUDA unit that includes
no torch header (nvcc compiles it in about a second); the host wrapper goes into a C++ unit compiled with
a precompiled header of cuda_begin's torch headers; what both sides use (cdiv, `constexpr int tw`,
#defines, structs, __host__ __device__ functions) goes into both. Each launch `k<<<grid, block>>>(args)`
in the wrapper becomes a call of a stub in the CUDA unit that launches k with the same configuration and
arguments, converted to k's parameter types at the student's line, as the launch would be:

    __course_launch_k::run(::course_split::config("k", grid, block), args)

A kernel named as a value (`launch(matmul_kt<16>)`, handed to a generic lambda that launches its
parameter: `kernel<<<...>>>(...)`) is an object in the C++ unit whose call launches through the stub.
Templates launched from the wrapper are instantiated in the CUDA unit with the wrapper's arguments.

analyse() reads the source and says how to split it, or raises Unsplittable with the reason: whatever it
cannot place with certainty (a launch it cannot follow, host code that uses device data, conditional
compilation, namespaces, ...) is built as one unit (COURSE_SPLIT=0 builds every source so). The back ends (nvcc.py, cpu.py) write the
units with the line directives that keep every compiler message on the student's line and column.
"""
import json
import os
import re
import time
from dataclasses import dataclass, field

from ..prelude import cuda_begin
from . import objects
from .source import Edits, Unit, blank, close, kernel_name_start, launch_parts, line_col, split_top


class Unsplittable(Exception):
    """The source cannot be split with certainty; the message says why (it is built as one unit)."""


NS = "course_split"
GENERATED = "course_split"  # the file name compiler messages give the course's generated code
LAUNCH_DECLS = r'''
namespace course_split {
// A launch's configuration, from the wrapper (the C++ unit) to the stub that launches (the CUDA unit).
struct Launch { dim3 grid, block; size_t shmem; cudaStream_t stream; const char* name; };
inline Launch config(const char* name, dim3 grid, dim3 block, size_t shmem = 0, cudaStream_t stream = 0) {
  return Launch{grid, block, shmem, stream, name};
}
// The speed test's record of launches (course/harness/record.py reads it through course_note): one line a launch,
// "launch ENTRY NAME GX GY GZ BX BY BZ SHMEM STREAM" then each argument as p<size>:<hex> (a pointer) or s<size>:<hex>.
struct Noted { char text[1 << 20]; unsigned long used; int on, full; };
inline Noted& noted() { static Noted n{}; return n; }
inline void put(const char* s) {
  Noted& n = noted();
  for (; *s; ++s) {
    if (n.used + 1 >= sizeof(n.text)) { n.full = 1; return; }
    n.text[n.used++] = *s;
  }
  n.text[n.used] = 0;
}
inline void put_num(unsigned long long v) {
  char d[24]; int i = 23; d[i] = 0;
  do { d[--i] = char('0' + v % 10); v /= 10; } while (v);
  put(d + i);
}
inline void put_hex(const void* p, unsigned long size) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (unsigned long i = 0; i < size; ++i) { const char two[3] = {hex[b[i] >> 4], hex[b[i] & 15], 0}; put(two); }
}
template <class T> struct is_pointer { enum { value = 0 }; };
template <class T> struct is_pointer<T*> { enum { value = 1 }; };
template <class T> void note_arg(T v) {  // by value: a __restrict__ pointer's qualifier is dropped
  put(is_pointer<T>::value ? " p" : " s"); put_num(sizeof(T)); put(":"); put_hex((const void*)&v, sizeof(T));
}
int entry_of(const void* stub);  // the stub's place in the CUDA unit's table of entries (its end defines it)
template <class... A> void note(const Launch& c, const void* stub, const char* (*namer)(const void*),
                                 const void* kernel, A... a) {
  if (!noted().on) return;
  const int entry = entry_of(stub);
  const char* name = namer ? namer(kernel) : "";
  put("launch ");
  if (entry < 0) put("-1"); else put_num(entry);
  put(" "); put(*name ? name : "-");
  const unsigned long long d[8] = {c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.shmem,
                                   (unsigned long long)(size_t)c.stream};
  for (int i = 0; i < 8; ++i) { put(" "); put_num(d[i]); }
  const int each[] = {0, (note_arg(a), 0)...}; (void)each;
  put("\n");
}
// A recorded launch again, from its arguments' bytes (CPU mode's replay: course_replay, below).
template <int... I> struct seq {};
template <int N, int... I> struct make_seq : make_seq<N - 1, N - 1, I...> {};
template <int... I> struct make_seq<0, I...> { typedef seq<I...> type; };
template <class... P, int... I> void replay_call(void (*run)(const Launch&, P...), const Launch& c, void** a, seq<I...>) {
  run(c, *static_cast<P*>(a[I])...);
}
template <class... P> void replay(void (*run)(const Launch&, P...), const Launch& c, void** a) {
  replay_call(run, c, a, typename make_seq<sizeof...(P)>::type());
}
}  // namespace course_split
'''

# The GPU build's CUDA unit notes each launch's configuration as its stub launches (gpu_launch), for
# course/harness/origin.py to read through ctypes; CPU mode's runtime exports the same function.
LAUNCH_RECORD = r'''
namespace course_split { Launch last{}; }
extern "C" __attribute__((visibility("default"))) const char* course_last_launch(unsigned int* dims) {
  const course_split::Launch& l = course_split::last;
  const unsigned int d[6] = {l.grid.x, l.grid.y, l.grid.z, l.block.x, l.block.y, l.block.z};
  for (int i = 0; i < 6; ++i) dims[i] = d[i];
  return l.name ? l.name : "";
}
namespace course_split {
inline const char* kernel_name(const void* kernel) {  // its mangled name, which the module's cubin knows it by
  const char* name = nullptr;
  return cudaFuncGetName(&name, kernel) == cudaSuccess && name ? name : "";
}
}  // namespace course_split
'''

# What cuda_runtime.h gives host code compiled by nvcc only: the symbol functions that take the variable itself,
# `cudaMemcpyToSymbol(counter, &zero, sizeof(zero))`. The C++ unit (g++) of a GPU build declares them the same way.
HOST_SYMBOL_API = r'''
#ifndef __CUDACC__
template <class T> static inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count,
    size_t offset = 0, enum cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  return ::cudaMemcpyToSymbol((const void*)&symbol, src, count, offset, kind);
}
template <class T> static inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count,
    size_t offset = 0, enum cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t stream = 0) {
  return ::cudaMemcpyToSymbolAsync((const void*)&symbol, src, count, offset, kind, stream);
}
template <class T> static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count,
    size_t offset = 0, enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  return ::cudaMemcpyFromSymbol(dst, (const void*)&symbol, count, offset, kind);
}
template <class T> static inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count,
    size_t offset = 0, enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t stream = 0) {
  return ::cudaMemcpyFromSymbolAsync(dst, (const void*)&symbol, count, offset, kind, stream);
}
template <class T> static inline cudaError_t cudaGetSymbolAddress(void** devPtr, const T& symbol) {
  return ::cudaGetSymbolAddress(devPtr, (const void*)&symbol);
}
template <class T> static inline cudaError_t cudaGetSymbolSize(size_t* size, const T& symbol) {
  return ::cudaGetSymbolSize(size, (const void*)&symbol);
}
#endif
'''

# Names that only torch's headers give: an item using them belongs to the C++ unit.
TORCHY = {"torch", "at", "c10", "Tensor", "TORCH_CHECK", "CHECK_INPUT", "CHECK_CUDA", "CHECK_CONTIGUOUS",
          "C10_CUDA_KERNEL_LAUNCH_CHECK", "C10_CUDA_CHECK", "AT_CUDA_CHECK", "pybind11", "py", "AT_DISPATCH_FLOATING_TYPES",
          "AT_DISPATCH_ALL_TYPES", "TORCH_LIBRARY"}
_HOST_HEADERS = re.compile(r"^(torch/|ATen/|c10/|pybind11/|Python\.h$|caffe2/)")
_DEVICE_HEADERS = re.compile(r"^(cooperative_groups|cub/|mma\.h$|cuda/|curand_kernel\.h$|cuda_pipeline|cuda_awbarrier|"
                             r"sm_\d+_|crt/)")
_BOTH_HEADERS = re.compile(r"^(cuda_runtime(_api)?\.h|cuda\.h|cuda_fp16\.h|cuda_bf16\.h|cuda_fp8\.h|vector_types\.h|"
                           r"vector_functions\.h|device_launch_parameters\.h|device_functions\.h|math_constants\.h|"
                           r"driver_types\.h|builtin_types\.h|[a-z_0-9]+(\.h)?)$")
# Words that name no entity of the student's (C++ keywords, built-in types, what cuda_begin and CUDA give).
KEYWORDS = set("""alignas alignof and asm auto bool break case catch char char8_t char16_t char32_t class const
constexpr consteval constinit const_cast continue decltype default delete do double dynamic_cast else enum explicit
export extern false float for friend goto if inline int long mutable namespace new noexcept not nullptr operator or
private protected public register reinterpret_cast requires return short signed sizeof static static_assert
static_cast struct switch template this thread_local throw true try typedef typeid typename union unsigned using
virtual void volatile wchar_t while size_t ptrdiff_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t
uint64_t std dim3 cdiv __restrict__ __host__ __device__ __global__ __forceinline__ __noinline__ __half __nv_bfloat16
float2 float3 float4 int2 int3 int4 uint2 uint3 uint4 uchar4 uchar3 uchar2 char4 double2 half""".split())


@dataclass
class Kernel:
    name: str
    template: str | None  # the template header's code, `template <int tw>`, or None
    targs: str            # `<tw>` (the header's parameters as arguments), or ""
    params: str           # the parameter list's code, whitespace collapsed
    names: list           # the parameters' names, in order
    item: int             # index of its item
    instances: list = field(default_factory=list)  # template arguments the wrapper uses, `<16>`


@dataclass
class Item:
    start: int
    end: int
    unit: str             # "device", "host" or "both"
    names: set            # the names it defines
    kind: str = "decl"    # "pp" (a preprocessor line), "func" (a function definition), "kernel", "decl"
    defines_function: bool = False


@dataclass
class Plan:
    begin: str            # cuda_begin, which cuda_src starts with
    body: str             # the student's text after it
    code: str             # body with comments and literals blanked
    items: list
    kernels: dict         # name -> Kernel, defined in the source
    host_edits: Edits     # launches rewritten to stub calls, `static` for __host__ __device__ functions
    device_edits: Edits
    exact_lines: dict     # unit -> True where line numbers must be exact in the object (assert, __LINE__)
    symbols: dict = field(default_factory=dict)  # device variable the host code names -> (item index, type, suffix)


def _words(text):
    return set(re.findall(r"[A-Za-z_]\w*", text))


def _uses(code):
    """Identifiers code uses as names of its own: member accesses (x.size, p->w) and qualified names (torch::empty) left out."""
    out = set()
    for m in re.finditer(r"[A-Za-z_]\w*", code):
        before = code[:m.start()].rstrip()
        if before.endswith((".", "->", "::")):
            continue
        out.add(m.group())
    return out


def _skip_template(code, i=0):
    """(template header, index after it) when code[i:] starts with `template <...>`, else ("", i)."""
    m = re.match(r"\s*template\s*<", code[i:])
    if not m:
        return "", i
    lt = i + m.end() - 1
    end = close(code, lt, "<>")
    return code[i:end].strip(), end


def _items(code):
    """The top-level items of blanked code: (start, end, kind) with kind "pp" or "decl"."""
    items, i, n = [], 0, len(code)
    while i < n:
        while i < n and code[i].isspace():
            i += 1
        if i >= n:
            break
        if code[i] == "#":
            j = i
            while True:
                e = code.find("\n", j)
                e = n if e < 0 else e
                if code[:e].rstrip(" \t").endswith("\\") and e < n:
                    j = e + 1
                    continue
                break
            items.append((i, e, "pp"))
            i = e
            continue
        if re.match(r'(namespace\b[^;{=]*\{|extern\s+"[^"]*"\s*\{)', code[i:]):
            raise Unsplittable("a namespace or extern \"C\" block")
        stack, j, end = [], i, None
        while j < n:
            c = code[j]
            if c in "([{":
                stack.append((c, j))
            elif c in ")]}":
                if not stack:
                    raise Unsplittable(f"an unmatched '{c}' at the top level")
                opener, at = stack.pop()
                if c == "}" and not stack and _is_function_head(code[i:at]):
                    end = j + 1
                    break
            elif c == ";" and not stack:
                end = j + 1
                break
            elif c == "#" and not stack and code[:j].rstrip(" \t").endswith("\n"):
                raise Unsplittable("a preprocessor line inside a declaration")
            j += 1
        if end is None:
            raise Unsplittable("a declaration that does not end")
        items.append((i, end, "decl"))
        i = end
    return items


def _is_function_head(head):
    """True when head (the text before a top-level `{`) is a function's: it ends with its parameter list."""
    tmpl, k = _skip_template(head)
    rest = head[k:]
    if re.match(r"\s*(namespace|extern\s+\"|struct|class|union|enum)\b", rest):
        return False
    if _eq_at_top(rest):
        return False
    return bool(re.search(r"\)\s*((const|noexcept|override|final|mutable)\s*|->[^;{}]*)*$", rest))


def _eq_at_top(text):
    depth = 0
    for c in text:
        depth += c in "([{<"
        depth -= c in ")]}>"
        if c == "=" and depth == 0:
            return True
    return False


def _declared_names(rest):
    """The variables a declaration (code after any template header, without its `;`) declares."""
    names = []
    for part in split_top(rest):
        part = re.split(r"[=({]", part, maxsplit=1)[0]
        part = re.sub(r"\[[^\]]*\]", " ", part)
        ids = re.findall(r"[A-Za-z_]\w*", part)
        ids = [w for w in ids if w not in KEYWORDS]
        if ids:
            names.append(ids[-1])
    return names


def _param_names(params, template_types):
    """The names of a kernel's parameters (raises Unsplittable for one without a name or with a default)."""
    text = params.strip()
    if text in ("", "void"):
        return []
    names = []
    for p in split_top(text):
        p = p.strip()
        if "=" in p or "..." in p or "(" in p:
            raise Unsplittable("a kernel parameter with a default value, a pack or a function pointer")
        p = re.sub(r"(\s*\[[^\]]*\])+\s*$", "", p)
        m = re.search(r"([A-Za-z_]\w*)\s*$", p)
        ids = re.findall(r"[A-Za-z_]\w*", p)
        if not m or len(ids) < 2 or m.group(1) in KEYWORDS or m.group(1) in template_types \
                or p[:m.start()].rstrip().endswith("::"):
            raise Unsplittable(f"a kernel parameter without a name ({p})")
        names.append(m.group(1))
    return names


def _template_params(header):
    """(argument list `<a, b>`, type parameter names) of a template header `template <typename T, int N>`."""
    inner = header[header.index("<") + 1:header.rindex(">")]
    names, types = [], set()
    for p in split_top(inner):
        p = p.strip()
        if not p or "..." in p or "=" in p or "template" in p:
            raise Unsplittable("a kernel template with defaults, packs or template parameters")
        m = re.search(r"([A-Za-z_]\w*)\s*$", p)
        if not m or len(re.findall(r"[A-Za-z_]\w*", p)) < 2:
            raise Unsplittable("a kernel template parameter without a name")
        names.append(m.group(1))
        if re.match(r"(typename|class)\b", p):
            types.add(m.group(1))
    return f"<{', '.join(names)}>", types


def _classify(code, start, end, kind):
    """(unit, names, kind, kernel parts or None) of one item."""
    text = code[start:end]
    if kind == "pp":
        m = re.match(r"\s*#\s*(\w+)\s*(.*)", text, re.S)
        directive, rest = (m.group(1), m.group(2).strip()) if m else ("", "")
        if directive == "include":
            hm = re.match(r"[<\"]\s*([^>\"]+?)\s*[>\"]", rest)
            if not hm:
                raise Unsplittable("an #include of a computed name")
            header = hm.group(1)
            if _HOST_HEADERS.match(header):
                return "host", set(), "pp", None
            if _DEVICE_HEADERS.match(header):
                return "device", set(), "pp", None
            if _BOTH_HEADERS.match(header) or re.match(r"[a-z_0-9]+(\.h)?$", header):
                return "both", set(), "pp", None
            raise Unsplittable(f"an #include of {header}")
        if directive in ("define", "undef"):
            return "both", set(), "pp", None
        if directive == "pragma":
            return "both", set(), "pp", None
        raise Unsplittable(f"a #{directive or '...'} line (conditional compilation)")
    tmpl, k = _skip_template(text)
    rest = text[k:]
    if re.match(r"\s*template\b", rest):
        raise Unsplittable("a template of a template")
    body_at = None
    if rest.rstrip().endswith("}") and _is_function_head(text[:_body_open(text)]):
        body_at = _body_open(text)
    head_end = len(rest)
    for ch in "({=;":
        p = rest.find(ch)
        if 0 <= p < head_end:
            head_end = p
    head = rest[:head_end]
    words = _words(head)
    all_words = _words(text)
    torchy = bool(all_words & TORCHY)
    if re.match(r"\s*;\s*$", rest):
        return "both", set(), "decl", None
    if "__global__" in words:
        if body_at is None:
            raise Unsplittable("a kernel declared before it is defined")
        return "device", set(), "kernel", (tmpl, rest, k)
    if words & {"__device__", "__constant__", "__shared__", "__managed__"}:
        unit = "both" if "__host__" in words else "device"
        return unit, _names_of(tmpl, rest, body_at is not None), "func" if body_at is not None else "decl", None
    if "__host__" in words:
        return "host", _names_of(tmpl, rest, body_at is not None), "func" if body_at is not None else "decl", None
    first = re.match(r"\s*([A-Za-z_]\w*)", rest)
    first = first.group(1) if first else ""
    if first == "namespace":
        m = re.match(r"\s*namespace\s+(\w+)\s*=\s*([\w:]+)\s*;", rest)
        if not m:
            raise Unsplittable("a namespace block")
        target = m.group(2).split("::")[0].lstrip(":")
        unit = "host" if target in TORCHY else "device" if target in ("cooperative_groups", "nvcuda", "cub") else "both"
        return unit, {m.group(1)}, "decl", None
    if first == "using":
        m = re.match(r"\s*using\s+namespace\s+([\w:]+)\s*;", rest)
        if m:
            target = m.group(1).lstrip(":").split("::")[0]
            unit = "host" if target in TORCHY else "device" if target in ("cooperative_groups", "nvcuda", "cub") else "both"
            return unit, set(), "decl", None
        m = re.match(r"\s*using\s+(\w+)\s*=", rest)
        return ("host" if torchy else "both"), ({m.group(1)} if m else set()), "decl", None
    if first in ("struct", "class", "union", "enum"):
        m = re.match(r"\s*(?:struct|class|union|enum(?:\s+class|\s+struct)?)\s+(?:alignas\s*\([^)]*\)\s*)?(\w+)", rest)
        names = {m.group(1)} if m else set()
        tail = rest[rest.rfind("}") + 1:] if "}" in rest else ""
        names |= set(_declared_names(tail.rstrip().rstrip(";"))) if tail.strip(" \n;") else set()
        return ("host" if torchy else "both"), names, "decl", None
    if first == "typedef":
        ids = re.findall(r"[A-Za-z_]\w*", rest.rstrip().rstrip(";"))
        return ("host" if torchy else "both"), {ids[-1]} if ids else set(), "decl", None
    if first == "static_assert":
        return ("host" if torchy else "both"), set(), "decl", None
    if "extern" in words:
        raise Unsplittable("an extern declaration")
    if "constexpr" in words:
        return ("host" if torchy else "both"), _names_of(tmpl, rest, body_at is not None), \
            "func" if body_at is not None else "decl", None
    if body_at is not None:
        return "host", _names_of(tmpl, rest, True), "func", None
    if "(" in rest[:len(rest)] and not _eq_at_top(rest) and re.search(r"\)\s*(const|noexcept)?\s*;\s*$", rest):
        return "host", _names_of(tmpl, rest, True), "decl", None  # a function's declaration
    names = set(_declared_names(rest.rstrip().rstrip(";")))
    if "const" in words and not torchy and not tmpl:
        return "both", names, "decl", None
    return "host", names, "decl", None


def _body_open(text):
    """The index of the `{` that opens a function body ending text (its matching brace)."""
    depth = 0
    for j in range(len(text) - 1, -1, -1):
        if text[j] == "}":
            depth += 1
        elif text[j] == "{":
            depth -= 1
            if depth == 0:
                return j
    return 0


def _names_of(tmpl, rest, is_function):
    if is_function:
        paren = _param_open(rest)
        m = re.search(r"([A-Za-z_]\w*)\s*$", rest[:paren]) if paren is not None else None
        return {m.group(1)} if m else set()
    return set(_declared_names(rest.rstrip().rstrip(";")))


def _param_open(rest):
    """The index of the `(` that opens a function's parameter list in rest (the one before its body or `;`)."""
    end = rest.find("{") if "{" in rest else len(rest)
    depth_end = None
    for j in range(end - 1, -1, -1):
        if rest[j] == ")":
            depth_end = j
            break
    if depth_end is None:
        return None
    depth = 0
    for j in range(depth_end, -1, -1):
        depth += rest[j] == ")"
        depth -= rest[j] == "("
        if depth == 0:
            return j
    return None


def _kernel(code, start, end, parts, index):
    tmpl, rest, k = parts
    head_text = code[start:end]
    body = _body_open(head_text)
    paren = _param_open(head_text[:body] + "{")
    if paren is None:
        raise Unsplittable("a kernel whose parameters cannot be read")
    m = re.search(r"([A-Za-z_]\w*)\s*$", head_text[:paren])
    if not m:
        raise Unsplittable("a kernel without a name")
    params_end = close(head_text, paren, "()")
    params = re.sub(r"\s+", " ", head_text[paren + 1:params_end - 1]).strip()
    quals = head_text[len(tmpl) if tmpl else 0:m.start()]
    if "void" not in _words(quals) or "extern" in _words(quals):
        raise Unsplittable("a kernel that is extern or does not return void")
    targs, types = _template_params(tmpl) if tmpl else ("", set())
    names = _param_names(params, types)
    return Kernel(m.group(1), re.sub(r"\s+", " ", tmpl) if tmpl else None, targs, params, names, index)


def _is_cuda_begin_start(cuda_src):
    return cuda_begin if cuda_src.startswith(cuda_begin) else None


def parts(cuda_src):
    """(cuda_begin, the student's text after it) when cuda_src starts with cuda_begin, else ("", cuda_src).

    Students write `cuda_src = cuda_begin + r\"\"\"` on a cell's first line, so line N of the text after cuda_begin is
    line N of their cell: compiler messages count the lines from there."""
    begin = _is_cuda_begin_start(cuda_src)
    return (begin, cuda_src[len(begin):]) if begin is not None else ("", cuda_src)


def without_lines(text):
    """text with the line numbers of its `#line` directives left out: an object's cache key, where moving code up or
    down (an edit elsewhere) changes nothing the object holds but line numbers nobody sees."""
    return re.sub(r'^#line \d+ "cuda_src"$', '#line 0 "cuda_src"', text, flags=re.M)


def analyse(cuda_src, one_unit=None):
    """How to split cuda_src: a Plan, or Unsplittable with the reason it is built as one unit (one_unit, when given)."""
    if one_unit:
        raise Unsplittable(one_unit)
    if os.environ.get("COURSE_SPLIT", "1").strip() == "0":
        raise Unsplittable("COURSE_SPLIT=0")
    begin = _is_cuda_begin_start(cuda_src)
    if begin is None:
        raise Unsplittable("cuda_src does not start with cuda_begin")
    body = cuda_src[len(begin):]
    code = blank(body)
    items, kernels = [], {}
    for index, (start, end, kind) in enumerate(_items(code)):
        unit, names, kind2, parts = _classify(code, start, end, kind)
        item = Item(start, end, unit, set(names), kind2)
        if kind2 == "kernel":
            k = _kernel(code, start, end, parts, index)
            if k.name in kernels:
                raise Unsplittable(f"two kernels named {k.name}")
            kernels[k.name] = k
            item.names = {k.name}
        items.append(item)
    defined = {u: set() for u in ("device", "host", "both")}
    for item in items:
        defined[item.unit] |= item.names
    if set(kernels) & (defined["host"] | defined["both"]):
        raise Unsplittable("a kernel's name is also a host function's or variable's")
    device_only = defined["device"] - defined["both"] - defined["host"]
    host_only = defined["host"] - defined["both"] - defined["device"]

    variables = {}  # device variables the host code may name (cudaMemcpyToSymbol): name -> (item, type, suffix)
    for n, item in enumerate(items):
        if item.unit == "device" and item.kind == "decl" and len(item.names) == 1:
            found = _device_variable(code[item.start:item.end], next(iter(item.names)))
            if found:
                variables[next(iter(item.names))] = (n, *found)

    host_edits, device_edits = Edits(body), Edits(body)
    symbols = {}
    launch_spans = []
    for m in re.finditer(r"<<<", code):
        item = next((it for it in items if it.start <= m.start() < it.end), None)
        if item is None or item.unit != "host":
            raise Unsplittable("a launch outside the host code (a kernel that launches kernels)")
        launch_spans.append(_launch(code, m, kernels, defined, host_edits, items))

    for n, item in enumerate(items):
        text = code[item.start:item.end]
        uses = _uses(text) - item.names
        if item.unit in ("device", "both") and item.kind != "pp":
            wrong = uses & host_only
            if wrong:
                raise Unsplittable(f"device code uses {sorted(wrong)[0]}, which the host code defines")
        if item.unit in ("host", "both") and item.kind != "pp":
            for name in (uses & device_only) & set(variables):
                symbols[name] = variables[name]
            wrong = (uses & device_only) - set(kernels) - set(variables)
            if wrong:
                raise Unsplittable(f"host code uses {sorted(wrong)[0]}, which only device code has")
            if item.unit == "host":
                _kernel_values(code, item, kernels, launch_spans, defined)
            elif uses & set(kernels):
                raise Unsplittable("a __host__ __device__ function names a kernel")
        if item.unit in ("device", "both") and item.kind != "pp" and _uses(text) & TORCHY:
            raise Unsplittable(f"device code uses torch's {sorted(_uses(text) & TORCHY)[0]}")
        if item.unit == "both" and item.kind != "pp":
            tmpl, k = _skip_template(text)
            rest = text[k:]
            is_function = item.kind == "func" or (_param_open(rest) is not None and not _eq_at_top(rest)
                                                  and re.search(r"\)\s*(const|noexcept)?\s*;\s*$", rest))
            head = rest[:_param_open(rest) or 0]
            if is_function and not tmpl and not _words(head) & {"inline", "static", "constexpr", "__forceinline__"}:
                # defined in both units: the C++ unit's copy is its own, or the link would find two
                at = item.start + k + (len(rest) - len(rest.lstrip()))
                host_edits.replace(at, at, "static ")
    exact = {}
    for unit in ("device", "host"):
        texts = [code[it.start:it.end] for it in items if it.unit in (unit, "both")]
        exact[unit] = any(re.search(r"\b(assert|__LINE__|__FILE__)\b", t) for t in texts)
    return Plan(begin, body, code, items, kernels, host_edits, device_edits, exact, symbols)


def _device_variable(text, name):
    """(type, suffix) of a __device__ or __constant__ variable that host code may name (one declarator,
    external linkage), as `type (&name) suffix` declares a reference to it; None for any other."""
    words = _words(text)
    if not words & {"__device__", "__constant__"} or words & {"__managed__", "__shared__", "static", "const",
                                                              "constexpr", "extern", "template", "__host__"}:
        return None
    decl = re.split(r"[={]", text.rstrip().rstrip(";"), maxsplit=1)[0]
    if len(split_top(decl)) != 1:
        return None
    decl = re.sub(r"\b(__device__|__constant__)\b", " ", decl)
    m = None
    for m in re.finditer(rf"\b{re.escape(name)}\b", decl):
        pass
    if m is None:
        return None
    kind, suffix = decl[:m.start()].strip(), decl[m.end():].strip()
    if not kind or (suffix and not re.fullmatch(r"(\[[^\]]*\]\s*)+", suffix)):
        return None
    return re.sub(r"\s+", " ", kind), re.sub(r"\s+", "", suffix)


def _template_args_ok(args, defined):
    known = KEYWORDS | defined["both"]
    for w in _words(args):
        if w not in known:
            raise Unsplittable(f"a kernel's template argument uses {w}, which the CUDA unit does not have")


def _launch(code, m, kernels, defined, edits, items):
    """Rewrites the launch at m (`<<<`) into a stub call; returns the span of its kernel's name."""
    end_cfg, after = launch_parts(code, m.end())
    if end_cfg < 0:
        raise Unsplittable("a launch without >>>")
    if after < 0:
        raise Unsplittable("a launch without arguments")
    args_end = close(code, after, "()")
    start = kernel_name_start(code, m.start())
    name_text = code[start:m.start()]
    compact = re.sub(r"\s+", "", name_text)
    nm = re.fullmatch(r"([A-Za-z_]\w*)(<.*>)?", compact)
    if not nm:
        raise Unsplittable(f"a launch of {compact or 'an expression'}")
    base = nm.group(1)
    cfg = code[m.end():end_cfg]
    if not 2 <= len(split_top(cfg)) <= 4 or not cfg.strip():
        raise Unsplittable("a launch configuration without 2 to 4 parts")
    empty = not code[after + 1:args_end - 1].strip()
    if base in kernels:
        k = kernels[base]
        targs = ""
        if nm.group(2):
            targs = "<" + re.sub(r"\s+", " ", name_text[name_text.index("<") + 1:name_text.rindex(">")]).strip() + ">"
        if bool(k.template) != bool(targs):
            raise Unsplittable(f"a launch of {base} whose template arguments are left to deduction")
        if targs:
            if len(split_top(targs[1:-1])) != len(split_top(k.targs[1:-1])):
                raise Unsplittable(f"a launch of {base} with defaulted template arguments")
            _template_args_ok(targs, defined)
            k.instances.append(targs)
        head = f'__course_launch_{base}{targs}::run(::{NS}::config("{compact}", '
    else:
        if nm.group(2):
            raise Unsplittable(f"a launch of {compact}, which is not a kernel of this source")
        if base in defined["device"] | defined["host"] | defined["both"]:
            raise Unsplittable(f"a launch of {base}, which is not a kernel")
        head = f'{base}(::{NS}::config("{base}", '
    edits.replace(start, m.end(), head)
    edits.replace(end_cfg, after + 1, ")" if empty else "), ")
    return start, m.start()


def _kernel_values(code, item, kernels, launch_spans, defined):
    """Checks each mention of a kernel in host code that is not a launch: only an argument of a local lambda."""
    if not kernels:
        return
    text = code[item.start:item.end]
    pattern = re.compile(r"(?<![\w.:>])(" + "|".join(map(re.escape, kernels)) + r")\b")
    for m in pattern.finditer(code, item.start, item.end):
        if any(a <= m.start() < b for a, b in launch_spans):
            continue
        k = kernels[m.group(1)]
        j = m.end()
        while j < item.end and code[j].isspace():
            j += 1
        targs = ""
        if j < item.end and code[j] == "<":
            e = close(code, j, "<>")
            targs = "<" + re.sub(r"\s+", " ", code[j + 1:e - 1]).strip() + ">"
            j = e
            while j < item.end and code[j].isspace():
                j += 1
        before = code[item.start:m.start()].rstrip()
        if not (before.endswith(("(", ",")) and j < item.end and code[j] in ",)"):
            raise Unsplittable(f"host code uses the kernel {k.name} other than to launch it")
        depth, p = 0, m.start() - 1
        while p >= item.start:
            if code[p] == ")":
                depth += 1
            elif code[p] == "(":
                if depth == 0:
                    break
                depth -= 1
            p -= 1
        callee = re.search(r"([A-Za-z_]\w*)\s*$", code[item.start:p])
        if not callee or not re.search(r"\bauto\s+" + callee.group(1) + r"\s*=\s*\[", text):
            raise Unsplittable(f"host code uses the kernel {k.name} other than to launch it (or hand it to a lambda "
                               "that launches it)")
        if bool(k.template) != bool(targs):
            raise Unsplittable(f"the kernel template {k.name} named without its template arguments")
        if targs:
            _template_args_ok(targs, defined)
            k.instances.append(targs)


# ---- the units --------------------------------------------------------------------------------------

def host_declarations(k):
    """What the C++ unit knows of kernel k: its stub's declaration, and an object standing for k itself."""
    t = f"{k.template} " if k.template else ""
    cfg = f"const ::{NS}::Launch& course_cfg_"
    params = f"{cfg}, {k.params}" if k.names else cfg
    run = f"__course_launch_{k.name}{k.targs}::run"
    return (f"{t}struct __course_launch_{k.name} {{ static void run({params}); }};\n"
            f"{t}struct __course_handle_{k.name} {{ template <class... A> void operator()({cfg}, A&&... a) const "
            f"{{ {run}(course_cfg_, static_cast<A&&>(a)...); }} }};\n"
            f"{t}constexpr __course_handle_{k.name}{k.targs} {k.name}{{}};\n")


def device_stub(k, launch):
    """The stub in the CUDA unit that launches k: launch(kernel expression, argument names) is its body."""
    t = f"{k.template} " if k.template else ""
    cfg = f"const ::{NS}::Launch& course_cfg_"
    params = f"{cfg}, {k.params}" if k.names else cfg
    return (f"{t}struct __course_launch_{k.name} {{ static void run({params}); }};\n"
            f"{t}void __course_launch_{k.name}{k.targs}::run({params}) {{ "
            f"{launch(k.name + k.targs, ', '.join(k.names), f'__course_launch_{k.name}{k.targs}::run')} }}\n")


def instances(kernels):
    """The CUDA unit's table of entries: each kernel's stub, each template's with the arguments the wrapper uses (which
    instantiates them: the C++ unit calls them), as the speed test's record and replay name them (record.py), and
    the exported functions that record and replay launches (course_note, course_replay)."""
    stubs = [(f"__course_launch_{k.name}{args}::run", f"{k.name}{args}") for k in kernels.values()
             for args in (dict.fromkeys(k.instances) if k.template else [""])]
    rows = "".join(f"  {{(const void*)&{stub}, [](const Launch& c, void** a) {{ replay(&{stub}, c, a); }}, "
                   f"{json.dumps(name)}}},\n" for stub, name in stubs)
    return (f"namespace {NS} {{\n"
            "struct Entry { const void* stub; void (*replay)(const Launch&, void**); const char* name; };\n"
            f"__attribute__((used)) static const Entry entries[] = {{\n{rows}  {{nullptr, nullptr, nullptr}}}};\n"
            "int entry_of(const void* stub) {\n"
            "  for (int i = 0; entries[i].stub; ++i) if (entries[i].stub == stub) return i;\n"
            "  return -1;\n}\n}\n" + REPLAY_EXPORTS)


# What the speed test calls through ctypes: course_note(1) starts a record (cleared), course_note(0) ends it; both
# return it ("full" when it outgrew its buffer); course_replay launches one recorded launch again (CPU mode).
REPLAY_EXPORTS = r'''
extern "C" __attribute__((visibility("default"))) const char* course_note(int on) {
  course_split::Noted& n = course_split::noted();
  if (on) { n.used = 0; n.full = 0; n.text[0] = 0; }
  n.on = on;
  return n.full ? "full" : n.text;
}
extern "C" __attribute__((visibility("default"))) int course_replay(int entry, const unsigned int* dims,
                                                                   unsigned long shmem, void** args) {
  int count = 0;
  while (course_split::entries[count].stub) ++count;
  if (entry < 0 || entry >= count) return 1;
  const course_split::Entry& e = course_split::entries[entry];
  e.replay(course_split::Launch{dim3(dims[0], dims[1], dims[2]), dim3(dims[3], dims[4], dims[5]), shmem, 0, e.name}, args);
  return 0;
}
'''


def write_unit(plan, unit, head, launch=None):
    """The text of one unit ("device" or "host"): head, then the items that belong there, each on its own lines.

    In the C++ unit each kernel's place holds its stub's declaration; in the CUDA unit each kernel is
    followed by its stub, whose body is launch(kernel, argument names), and the templates' instances end it.
    """
    out = Unit()
    out.text(head)
    edits = plan.host_edits if unit == "host" else plan.device_edits
    body = plan.body
    previous = None
    symbols = {n: (name, kind, suffix) for name, (n, kind, suffix) in plan.symbols.items()}
    for n, item in enumerate(plan.items):
        if n in symbols and unit == "host":
            name, kind, suffix = symbols[n]
            out.line(1, GENERATED)
            out.text(f"void* __course_symbol_{name}();\n"
                     f"static {kind} (&{name}){suffix} = *reinterpret_cast<{kind} (*){suffix}>(__course_symbol_{name}());\n")
            previous = None
            continue
        if item.kind == "kernel" and unit == "host":
            out.line(1, GENERATED)
            out.text(host_declarations(plan.kernels[_kernel_at(plan, n)]))
            previous = None
            continue
        if item.unit not in (unit, "both"):
            continue
        if previous is not None and previous == n - 1:
            edits.emit(out, plan.items[previous].end, item.start)  # what lies between: spaces and comments
        else:
            line, col = line_col(body, item.start)
            out.line(line, "cuda_src")
            out.pad(item.start - col + 1, item.start)
        edits.emit(out, item.start, item.end)
        previous = n
        if item.kind == "kernel" and unit == "device":
            out.line(1, GENERATED)
            out.text(device_stub(plan.kernels[_kernel_at(plan, n)], launch))
            previous = None
        if n in symbols and unit == "device":
            out.line(1, GENERATED)
            out.text(f"void* __course_symbol_{symbols[n][0]}() {{ return (void*)&{symbols[n][0]}; }}\n")
            previous = None
    out.line(1, GENERATED)
    if unit == "device":
        out.text(instances(plan.kernels))
    return out


def unit_job(plan, which, label, head, command, suffix, depends, pch=False, launch=None):
    """The compile job of a split build's unit (write_unit's), its messages located on the student's lines."""
    unit = write_unit(plan, which, head, launch)
    text = unit.source()
    job = objects.Job(label, command, text, suffix, key_text=None if plan.exact_lines[which] else without_lines(text),
                      depends=depends)
    job.locate = {"cuda_src": unit.locator("cuda_src", plan.body)}
    job.pch = pch
    return job


def whole_unit(begin, body, head="", edits=Edits):
    """(text, locate) of the source as one file: head, then cuda_begin and cuda_src as edits() rewrites them."""
    unit = Unit()
    if head:
        unit.text(head)
    if begin:
        unit.line(1, "cuda_begin")
        unit.text(edits(begin).apply())
    unit.line(1, "cuda_src")
    edits(body).emit(unit, 0, len(body))
    unit.text("\n")
    return unit.source(), {"cuda_src": unit.locator("cuda_src", body)}


def _kernel_at(plan, index):
    return next(name for name, k in plan.kernels.items() if k.item == index)


def light_begin(begin):
    """cuda_begin without torch's headers (what the CUDA unit starts with): its macros and cdiv, and the small C
    headers torch's brought in that kernels use (assert, FLT_MAX, INT_MAX, uint8_t)."""
    keep = [line for line in begin.split("\n")
            if not re.match(r'\s*#\s*include\s*[<"](ATen|torch|c10)/', line) and not re.match(r"\s*namespace\s+torch\b", line)]
    return "#include <cassert>\n#include <cfloat>\n#include <climits>\n#include <cstdint>\n" + "\n".join(keep)


_UNDECLARED = re.compile(r'identifier "(\w+)" is undefined|namespace "(\w+)" has no member "(\w+)"'
                         r"|.(\w+). was not declared in this scope|.(\w+). is not a member of .(\w+)."
                         r"|.(\w+). has not been declared|.(\w+). does not name a type|.(\w+). is not a template")


def needs_torch_headers(plan, failed):
    """The name a split build's kernel unit missed that torch's headers declared before the split (`std::numeric_limits`,
    `M_PI`), or None: then the source is built as one unit again. failed: the jobs that did not compile."""
    if [j.label.split()[0] for j in failed] != ["kernel"]:
        return None
    own = set().union(*(it.names for it in plan.items)) if plan.items else set()
    for m in _UNDECLARED.finditer(failed[0].output):
        groups = [g for g in m.groups() if g]
        if m.group(2) or m.group(6):  # a member of a namespace: std::, c10::, at::
            space, name = (m.group(2), m.group(3)) if m.group(2) else (m.group(6), m.group(5))
            if space not in own:
                return f"{space}::{name}"
        name = groups[0]
        # a macro (FLT_MAX, M_PI, C10_WARP_SIZE) or a namespace, not a name the student mistyped (N, y)
        if name not in own and (re.fullmatch(r"[A-Z][A-Z0-9]*_[A-Z0-9_]+", name) or
                                name in ("INFINITY", "NAN", "assert", "std", "c10", "at", "torch")):
            return name
    return None


def first_error(output):
    """The first error line of a compiler's output, for saying why a build took another path."""
    return next((line.strip() for line in output.splitlines() if re.search(r"\berror\b", line)), "")


def compile_split(root, jobs, how, plan, one_unit, verbose=False, any_failure=False):
    """Compiles a build's jobs; where the split build's kernel or wrapper unit fails, the source as one unit instead
    (one_unit(why) plans those jobs). Returns (jobs, how) of the build that compiled; a BuildFailed raised holds the
    errors of the last build tried, and in .how which build that was.

    any_failure: every failure of the split's units is confirmed by the one-unit build before it is reported (the
    GPU build: nvcc accepts host code that g++ does not); else only kernels that used what torch's headers declare.
    """
    try:
        objects.compile_all(root, jobs, verbose)
        return jobs, how
    except objects.BuildFailed as e:
        e.how = how
        units = [j for j in e.jobs if not j.label.startswith("binding")]
        missing = plan and needs_torch_headers(plan, e.jobs)
        if missing:
            why = f"the kernels use {missing}, which torch's headers declare"
        elif plan and any_failure and units:
            why = f"the split build's {' and '.join(j.label for j in units)} did not compile ({first_error(units[0].output)})"
        else:
            raise
    if verbose:
        print(f"load_cuda: building as one unit: {why}", flush=True)
    jobs, how, _ = one_unit(why)
    try:
        objects.compile_all(root, jobs, verbose)
    except objects.BuildFailed as e:
        e.how = how
        raise
    return jobs, how


def _note(namer, kernel, args, stub):
    return f"::{NS}::note(course_cfg_, (const void*)&{stub}, {namer}, {kernel}{', ' + args if args else ''}); "


def gpu_launch(kernel, args, stub):
    return (_note(f"&::{NS}::kernel_name", f"(const void*){kernel}", args, stub) + f"::{NS}::last = course_cfg_; "
            f"{kernel}<<<course_cfg_.grid, course_cfg_.block, course_cfg_.shmem, course_cfg_.stream>>>({args});")


def cpu_launch(kernel, args, stub):
    return (_note("nullptr", "nullptr", args, stub) + f"::cuda_cpu::make_launch(course_cfg_.name, [&](auto&&... cuda_cpu_args_) {{ {kernel}(cuda_cpu_args_...); }}, "
            f"course_cfg_.grid, course_cfg_.block, course_cfg_.shmem, course_cfg_.stream)({args});")


def describe(cuda_src):
    """(True, "split") when load_cuda builds cuda_src as two units, else (False, the reason it builds one)."""
    try:
        analyse(cuda_src)
    except Unsplittable as e:
        return False, str(e)
    return True, "split"


def build_module(name, build_dir, plan, ldflags, binding, verbose=False, any_failure=False, fast=False):
    """Compiles what plan(one_unit=None) plans (split, or one unit where it fails), links and imports the module.

    Returns (module, report): how it was built and the seconds of each step. Both back ends build through here.
    """
    root = build_dir.parent
    t = time.perf_counter()
    jobs, how, units = plan()
    planned = time.perf_counter() - t
    try:
        jobs, how = compile_split(root, jobs, how, units, lambda why: plan(one_unit=why), verbose, any_failure=any_failure)
    finally:
        objects.start_pch()
    compiled = objects.last_cpu_seconds
    path = build_dir / f"{name}.so"
    linked = objects.link([j.obj for j in jobs], path, ldflags, name, binding, fast=fast)
    t = time.perf_counter()
    module = objects.import_module(name, path)
    report = {"how": how, "steps": {"analyse": planned, **{
        j.label + (" [cached]" if j.cached else " [with PCH]" if getattr(j, "pch", False) else ""): j.seconds
        for j in jobs}, "link": linked, "import": time.perf_counter() - t}, "compile_cpu_seconds": compiled}
    return module, report

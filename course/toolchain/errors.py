"""What the compiler said, in the student's terms: errors on the line (and column) of their own source, with that
line's text, in the names they wrote (torch::Tensor, their kernel's launch), undefined symbols explained."""
import re
import subprocess


class CompileError(RuntimeError):
    """The compiler rejected the source; the message holds its errors, with lines in your source."""

    how = None  # the build whose errors these are: "split", or "one unit: <why>"


_DIAG = re.compile(r"^(cuda_src|cpp_src|funcs)(?:\((\d+)\)|:(\d+):(\d+)|:(\d+))(: (?:fatal )?(error|warning).*)$")
_GENERATED = re.compile(r"^course_split(?:\((\d+)\)|:(\d+):(\d+)|:(\d+)): ")

# cuda_begin's light headers declare torch::Tensor and the few functions the lessons use; arithmetic on
# tensors (`0.3*t`, `a + b`) and PyTorch's other functions are not declared there.
_TORCH_MISSING = re.compile(
    r"no match for .operator[^']*. \(operand types are [^)]*Tensor|no operator \"[^\"]*\" matches these operands"
    r"|operand types are: [^\n]*Tensor|.(\w+). is not a member of .(?:torch|at)."
    r"|namespace \"(?:torch|at)\" has no member \"\w+\"|(?:class|struct) at::Tensor. has no member named")
TORCH_ARITHMETIC_HINT = (
    "Hint: cuda_begin includes only the PyTorch headers this course's wrappers need (torch::Tensor, torch::empty, "
    "torch::zeros, their _like forms, TORCH_CHECK), so a compile takes seconds: tensor arithmetic (`*`, `+` "
    "between tensors) and PyTorch's other functions (torch::sum, torch::matmul, ...) are not declared, which is "
    "what the compiler says above. The exercise forbids them anyway: the wrapper only creates the output and "
    "launches your kernel, and the kernel computes every element (the integrity test fails a wrapper that "
    "computes with PyTorch). Compute it in your kernel.")


def student_terms(text):
    """A compiler's line in the student's words: torch::Tensor for at::Tensor, their kernel for the course's launch stub."""
    text = re.sub(r"\bat::(Tensor\w*)", r"torch::\1", text)
    text = re.sub(r"(?:static )?void __course_launch_(\w+?)(<[^<>()]*>)?::run\(const course_split::Launch&(?:, )?",
                  r"\1\2<<<...>>>(", text)

    def arg(m):
        return f"argument {int(m.group(1)) - 1} of" if int(m.group(1)) > 1 else "the launch configuration of"
    if "<<<...>>>" in text:
        text = re.sub(r"argument (\d+) of", arg, text)
    text = re.sub(r"__course_launch_(\w+?)(<[^<>()]*>)?::run", r"\1\2<<<...>>>", text)
    text = re.sub(r"__course_(?:handle|symbol)_(\w+)", r"\1", text)
    text = re.sub(r"(?:::)?course_split::config\(\"[^\"]*\", ", "<<<", text)
    return text


def compiler_errors(log, sources, locate=None):
    """The compiler's error messages from a build log, each with the offending line of your source.

    sources: (cuda_src, cpp_src) as the student sees them (cuda_src after cuda_begin); locate: file label ->
    locate(line, col) giving the student's line and column for the compiler's (where the course rewrote the text).
    """
    texts = {"cuda_src": sources[0], "cpp_src": sources[1]}
    locate = locate or {}
    blocks, keep = [], False
    for line in log.splitlines():
        m = _DIAG.match(line)
        if m:
            keep = m.group(7) == "error"
            if keep:
                label = m.group(1)
                n = int(m.group(2) or m.group(3) or m.group(5))
                col = int(m.group(4)) if m.group(4) else None
                where = locate.get(label)
                found = where(n, col) if where else None
                if found:
                    n, col = found[0], (found[1] if col is not None else None)
                loc = f"{label}({n})" if m.group(2) else f"{label}:{n}:{col}" if col is not None else f"{label}:{n}"
                line = loc + m.group(6)
                src = texts.get(label, "").splitlines()
                blocks.append([student_terms(line)] + ([f"    {n:4d} | {src[n - 1]}"] if 0 < n <= len(src) else []))
            continue
        g = _GENERATED.match(line)
        if g:
            if keep and blocks and re.search(r" (error|note): ", line):
                blocks[-1].append(student_terms(line[g.end():]))
            elif " error: " in line:
                keep = True
                blocks.append([student_terms("(in the launch the course writes for you) " + line[g.end():])])
            continue
        if re.match(r"\d+ errors? detected in the compilation of", line):
            continue
        if keep and re.search(r"error|note:|candidate", line) and not line.startswith(("ninja", "[")) \
                and not re.match(r"\S+\.(cu|cpp|h|hpp|cuh)[:(]\d+", line):
            blocks[-1].append(student_terms(line))
    if not blocks:  # errors inside headers: show the compiler's lines as they are
        blocks = [[student_terms(line)] for line in log.splitlines() if re.search(r"\berror\b", line)
                  and not line.startswith(("ninja", "FAILED", "Error building"))]
    if not blocks:
        return None
    more = f"\n... and {len(blocks) - 10} more; fix the first one first." if len(blocks) > 10 else ""
    text = "\n".join(line for block in blocks[:10] for line in block) + more
    if _TORCH_MISSING.search(log):
        text += "\n" + TORCH_ARITHMETIC_HINT
    return text


def undefined_symbol(message):
    """The demangled name of the symbol an import failed on, or None."""
    m = re.search(r"undefined symbol: (\S+)", message)
    if not m:
        return None
    name = m.group(1)
    try:
        name = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip() or name
    except OSError:
        pass
    return student_terms(name)

"""What the compiler said, in the student's terms: errors with the line of their own source, undefined symbols explained."""
import re
import subprocess


class CompileError(RuntimeError):
    """The compiler rejected the source; the message holds its errors, with lines in your source."""


_DIAG = re.compile(r"^(cuda_src|cpp_src|funcs)(?:\((\d+)\)|:(\d+):\d+): (?:fatal )?(error|warning)")


def compiler_errors(log, sources):
    """The compiler's error messages from a build log, each with the offending line of your source."""
    texts = {"cuda_src": sources[0], "cpp_src": sources[1]}
    blocks, keep = [], False
    for line in log.splitlines():
        m = _DIAG.match(line)
        if m:
            keep = m.group(4) == "error"
            if keep:
                n = int(m.group(2) or m.group(3))
                src = texts.get(m.group(1), "").splitlines()
                blocks.append([line] + ([f"    {n:4d} | {src[n - 1]}"] if 0 < n <= len(src) else []))
        elif keep and re.search(r"error|note:|candidate", line) and not line.startswith(("ninja", "[")):
            blocks[-1].append(line)
    if not blocks:  # errors inside headers: show the compiler's lines as they are
        blocks = [[line] for line in log.splitlines() if re.search(r"\berror\b", line)
                  and not line.startswith(("ninja", "FAILED", "Error building"))]
    if not blocks:
        return None
    more = f"\n... and {len(blocks) - 10} more; fix the first one first." if len(blocks) > 10 else ""
    return "\n".join(line for block in blocks[:10] for line in block) + more


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
    return name

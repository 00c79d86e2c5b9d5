"""Reading a student's C++ without a compiler: where the code is (comments and literals blanked), brackets, and
edited text that remembers where each character came from, so a compiler's line and column lead back to the
student's own."""
import re


def blank(src):
    """src with comments and string and character literals blanked to spaces (newlines kept): where the code is."""
    out = list(src)
    i, n = 0, len(src)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            wipe(i, j)
            i = j
        elif c == '"' and i > 0 and src[i - 1] == "R" and not (i > 1 and (src[i - 2].isalnum() or src[i - 2] == "_")
                                                             and src[i - 2] not in "uUL8"):
            m = re.match(r'"([^()\\\s]{0,16})\(', src[i:])
            if not m:
                i += 1
                continue
            end = src.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            wipe(i + 1, j - 1)
            i = j
        elif c in "\"'":
            if c == "'":
                j = i
                while j > 0 and (src[j - 1].isalnum() or src[j - 1] in "_.'"):
                    j -= 1
                if j < i and src[j].isdigit():
                    i += 1  # a digit separator (1'000), not a character literal
                    continue
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            wipe(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def close(code, i, pair):
    """The index just past the bracket matching code[i] (pair: "()", "{}", "[]" or "<>")."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == pair[0]:
            depth += 1
        elif code[j] == pair[1]:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def kernel_name_start(code, end):
    """Where the kernel's name ends before `<<<` at end begins: `k`, `ns::k`, `k<float, 4>`."""
    i = end
    while i > 0 and code[i - 1].isspace():
        i -= 1
    if i > 0 and code[i - 1] == ">":  # template arguments
        depth = 0
        while i > 0:
            i -= 1
            if code[i] == ">":
                depth += 1
            elif code[i] == "<":
                depth -= 1
                if depth == 0:
                    break
        while i > 0 and code[i - 1].isspace():
            i -= 1
    while i > 0 and (code[i - 1].isalnum() or code[i - 1] in "_:"):
        i -= 1
    return i


def launch_parts(code, after):
    """(where `>>>` is, where the arguments' `(` is) of the launch whose `<<<` ends at after; -1 for what is missing."""
    end = code.find(">>>", after)
    if end < 0:
        return -1, -1
    paren = end + 3
    while paren < len(code) and code[paren].isspace():
        paren += 1
    return end, paren if paren < len(code) and code[paren] == "(" else -1


def split_top(text, sep=","):
    """text split at each sep outside (), [], {} and <> (template arguments), e.g. a parameter list."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def line_col(text, offset):
    """(line, column) of offset in text, both from 1."""
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


class Edits:
    """Rewrites of a source text, each kept with where it came from: replace(start, end, pieces), then apply()."""

    def __init__(self, src):
        self.src = src
        self.edits = []  # (start, end, pieces): a piece is generated text (str) or a span (a, b) of src copied

    def replace(self, start, end, *pieces):
        self.edits.append((start, end, pieces))

    def sorted(self, lo=0, hi=None):
        """The edits inside [lo, hi), in order, overlapping ones dropped (the first kept)."""
        hi = len(self.src) if hi is None else hi
        out, at = [], lo
        for start, end, pieces in sorted(self.edits, key=lambda e: (e[0], e[1])):
            if start < lo or end > hi or start < at:
                continue
            out.append((start, end, pieces))
            at = end
        return out

    def emit(self, out, lo, hi):
        """Appends src[lo:hi], edited, to out (a Unit): each character with the offset in src it came from."""
        at = lo
        for start, end, pieces in self.sorted(lo, hi):
            out.copy(self.src, at, start)
            newlines = self.src.count("\n", start, end)
            for piece in pieces:
                if isinstance(piece, str):
                    out.text(piece, origin=start)
                    newlines -= piece.count("\n")
                else:
                    out.copy(self.src, *piece)
                    newlines -= self.src.count("\n", *piece)
            if newlines > 0:  # every line stays where it was
                out.text("\n" * newlines, origin=start)
            at = end
        out.copy(self.src, at, hi)

    def apply(self):
        """The edited text alone."""
        unit = Unit()
        self.emit(unit, 0, len(self.src))
        return unit.source()


class Unit:
    """A file being written for a compiler, each character with the offset in the student's text it came from
    (None for the course's own), and `#line` directives naming what the compiler reports."""

    def __init__(self):
        self.chars, self.origin = [], []

    def text(self, s, origin=None):
        self.chars.append(s)
        self.origin.extend([origin] * len(s))

    def copy(self, src, a, b):
        if b > a:
            self.chars.append(src[a:b])
            self.origin.extend(range(a, b))

    def pad(self, a, b):
        """Spaces standing for src[a:b] (what comes before an item on its first line): columns stay the student's."""
        self.chars.append(" " * (b - a))
        self.origin.extend(range(a, b))

    def line(self, number, label):
        """A `#line` directive: the next line is `label`'s line `number`."""
        if self.chars and not "".join(self.chars[-1:]).endswith("\n"):
            self.text("\n")
        self.text(f'#line {number} "{label}"\n')

    def source(self):
        return "".join(self.chars)

    def locator(self, label, src):
        """locate(line, col) -> (line, col) in src for what a compiler reports as `label`'s line and column."""
        text = self.source()
        lines = {}  # reported line -> offsets in src of its characters
        current, number, pos = None, 0, 0
        for raw in text.split("\n"):
            m = re.match(r'#line (\d+) "([^"]*)"$', raw)
            if m:
                current, number = m.group(2), int(m.group(1))
            else:
                if current == label:
                    lines[number] = self.origin[pos:pos + len(raw)]
                number += 1
            pos += len(raw) + 1

        def locate(line, col=None):
            origins = lines.get(line)
            if not origins:
                return None
            known = [o for o in origins if o is not None]
            if not known:
                return None
            if col is None:
                first = next(o for o in origins if o is not None)
                return line_col(src, first)[0], None
            k = min(max(col - 1, 0), len(origins) - 1)
            before = [o for o in origins[:k + 1] if o is not None]
            o = before[-1] if before else known[0]
            return line_col(src, o)
        return locate

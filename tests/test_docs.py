"""The README stays short, and the README, docs/ and benchmarks/README.md point only at what exists.

README.md is the page a newcomer reads first (at most 15,000 bytes); everything else is in docs/ (one page per
reader's question) and benchmarks/README.md (every dated figure). These tests hold them to the repository: every
relative link leads to a file or folder here (and every #anchor to a heading of that page), every `make TARGET` is a
Makefile target, every `python -m course COMMAND` a subcommand of the CLI, every `.ci/NAME` a script, and every
repository path they name (course/..., tests/..., source/..., release/..., examples/..., benchmarks/..., docs/...,
.ci/...) exists.
"""
import argparse
import re

from tests.support import ROOT

README = ROOT / "README.md"
README_LIMIT = 15_000  # bytes


def doc_pages():
    """README.md, every page of docs/ and benchmarks/README.md."""
    return [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]


def rel(path):
    return path.relative_to(ROOT).as_posix()


FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
INLINE = re.compile(r"`([^`]+)`")


def code_of(text):
    """What the page shows as code: its fenced blocks and its inline code spans."""
    blocks = FENCE.findall(text)
    return blocks + INLINE.findall(FENCE.sub("", text))


def prose_of(text):
    """The page without its code, where markdown links live."""
    return INLINE.sub("", FENCE.sub("", text))


LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?", re.M)  # [name]: target, for [text][name]
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=[\"']([^\"']+)[\"']", re.I)
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...


def links(page):
    """(target, anchor) of each relative link of a page (inline, reference-style, an HTML <a> or <img>); a bare #anchor
    has target ''."""
    found, prose = [], prose_of(page.read_text())
    for url in LINK.findall(prose) + REFERENCE.findall(prose) + HTML_LINK.findall(prose):
        if EXTERNAL.match(url):
            continue
        target, _, anchor = url.partition("#")
        found.append((target, anchor))
    return found


def slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation but - and _ dropped, spaces as -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page):
    seen, out = {}, set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", FENCE.sub("", page.read_text()), re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, (f"README.md is {size:,} bytes, over the {README_LIMIT:,} allowed: move detail "
                                  "into docs/ (or dated figures into benchmarks/README.md) and link to it")


def test_relative_links_point_at_files_that_exist():
    missing = []
    for page in doc_pages():
        for target, _ in links(page):
            if not target:
                continue
            path = (page.parent / target).resolve()
            if not path.is_relative_to(ROOT):
                missing.append(f"{rel(page)}: {target} (outside the repository)")
            elif not path.exists():
                missing.append(f"{rel(page)}: {target}")
    assert not missing, "relative links to files or folders that do not exist:\n  " + "\n  ".join(missing)


def test_link_anchors_name_a_heading_of_their_page():
    missing = []
    for page in doc_pages():
        for target, anchor in links(page):
            path = (page.parent / target).resolve() if target else page
            if anchor and path.suffix == ".md" and path.is_file() and anchor not in anchors(path):
                missing.append(f"{rel(page)}: {target}#{anchor} (no such heading in {rel(path)})")
    assert not missing, "links to headings that do not exist:\n  " + "\n  ".join(missing)


def test_no_page_points_outside_the_repository():
    # e.g. ../shared/...: a reader of a clone has no such folder
    found = [f"{rel(page)}: {m}" for page in doc_pages()
             for m in re.findall(r"(?<![\w.])\.\./shared[^\s`)]*", page.read_text())]
    assert not found, "paths outside the repository:\n  " + "\n  ".join(found)


def makefile_targets():
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w.-]*)\s*:(?!=)", text, re.M))


def test_make_targets_exist():
    targets = makefile_targets()
    missing = []
    for page in doc_pages():
        for code in code_of(page.read_text()):
            for target in re.findall(r"(?<![\w.$/-])make\s+([a-z][\w.-]*)", code):
                if target not in targets:
                    missing.append(f"{rel(page)}: make {target}")
    assert not missing, (f"make targets the Makefile does not have (it has {', '.join(sorted(targets))}):\n  "
                         + "\n  ".join(sorted(set(missing))))


def cli_commands():
    from course.grading.cli import parser
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_course_commands_exist():
    commands = cli_commands()
    assert {"grade", "release", "doctor"} <= commands, f"could not read the CLI's subcommands: {commands}"
    missing = []
    for page in doc_pages():
        for code in code_of(page.read_text()):
            named = re.findall(r"python3?\s+-m\s+course\s+([a-z][\w-]*)", code)
            named += re.findall(r"^course\s+([a-z][\w-]*)", code.strip())  # the short form, `course grade ...`
            missing += [f"{rel(page)}: python -m course {name}" for name in named if name not in commands]
    assert not missing, (f"commands `python -m course` does not know (it knows {', '.join(sorted(commands))}):\n  "
                         + "\n  ".join(sorted(set(missing))))


def test_ci_scripts_exist():
    missing = [f"{rel(page)}: .ci/{name}" for page in doc_pages()
               for name in re.findall(r"(?<![\w/.-])\.ci/([\w-]+)", page.read_text())
               if not (ROOT / ".ci" / name).is_file()]
    assert not missing, "scripts of .ci/ that do not exist:\n  " + "\n  ".join(sorted(set(missing)))


REPO_PATH = re.compile(r"(?<![\w/.-])((?:course|tests|source|release|examples|benchmarks|docs|\.ci)/[^\s`'\"(),;:]*)")
# the assignment the docs walk through, which `python -m course new softmax` writes: not in the repository
GENERATED = {"softmax"}


def repository_paths(text):
    """The repository paths a page names in its code (fenced blocks and backticks): placeholders left out."""
    for code in code_of(text):
        for path in REPO_PATH.findall(code):
            path = path.rstrip(".")
            if any(c in path for c in "<>{}*$") or "..." in path or GENERATED & {part.split(".")[0] for part in path.split("/")}:
                continue
            yield path


def test_repository_paths_exist():
    missing = [f"{rel(page)}: {path}" for page in doc_pages() for path in repository_paths(page.read_text())
               if not (ROOT / path).exists()]
    assert not missing, "paths in backticks or code blocks that do not exist:\n  " + "\n  ".join(sorted(set(missing)))


def test_the_checks_read_what_the_readme_shows():
    # each check above must see something to check in the README, or it would pass on nothing
    text = README.read_text()
    assert [t for t, _ in links(README) if t.startswith("docs/")], "README.md links to no page of docs/"
    assert any(re.search(r"\bmake\s+\w", c) for c in code_of(text)), "README.md shows no make command"
    assert any(re.search(r"python\s+-m\s+course\s+\w", c) for c in code_of(text)), "README.md shows no course command"
    assert re.search(r"\.ci/\w", text), "README.md names no .ci/ script"
    assert list(repository_paths(text)), "README.md names no repository path in backticks"

"""The boundary is the architecture: the code that runs beside student code imports nothing that judges (the import
contract in pyproject.toml), and the package has no import circle (a function's import counts: it is a circle all the same
once it runs)."""
import ast
import subprocess
import sys
from pathlib import Path

import grimp

from tests.support import ROOT

HARNESS = ("course.harness", "course.isolation", "course.timing")
PACKAGE = ("course",)


def test_the_child_side_imports_nothing_that_judges():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "the child side imports nothing that judges KEPT" in proc.stdout


def circles(graph, prefixes):
    """The import circles among the modules named by prefixes: each a sorted list of modules (Tarjan's components)."""
    modules = sorted(m for m in graph.modules if m.startswith(prefixes))
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if not w.startswith(prefixes):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for m in modules:
        if m not in index:
            visit(m)
    return found


def test_the_package_has_no_import_circle():
    found = circles(grimp.build_graph("course", cache_dir=None), PACKAGE)
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_a_circle_is_found_where_there_is_one():
    class Graph:  # a -> b -> c -> a, and d alone
        modules = {"course.harness.a", "course.harness.b", "course.harness.c", "course.harness.d"}
        edges = {"course.harness.a": {"course.harness.b"}, "course.harness.b": {"course.harness.c"},
                 "course.harness.c": {"course.harness.a"}, "course.harness.d": {"course.harness.a"}}

        def find_modules_directly_imported_by(self, m):
            return self.edges.get(m, set())

    assert circles(Graph(), HARNESS) == [["course.harness.a", "course.harness.b", "course.harness.c"]]


def private_imports(path, root=ROOT):
    """`from m import _name` and `m._name` in a file, m a module of the course: a private name read across modules."""
    tree = ast.parse(path.read_text())
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("course")):
            modules |= {a.asname or a.name for a in node.names}
            found += [f"{path.relative_to(root)}:{node.lineno} imports {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
        elif isinstance(node, ast.Import):
            modules |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("course")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and node.attr.startswith("_") and not node.attr.startswith("__"):
            found.append(f"{path.relative_to(root)}:{node.lineno} reads {node.value.id}.{node.attr}")
    return found


def test_no_module_reads_another_modules_private_name():
    found = [f for p in sorted((ROOT / "course").rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
             for f in private_imports(p)]
    assert not found, "private names read across modules (make them public, or move the code): " + "; ".join(found)


def test_a_private_import_is_found_where_there_is_one(tmp_path):
    bad = tmp_path / "probe.py"
    bad.write_text("from .harness.child import _secret\nfrom course.harness import children\nchildren._server = 1\n"
                   "import os\nos._exit\n")
    assert [f.split(" ", 1)[1] for f in private_imports(bad, tmp_path)] == ["imports _secret", "reads children._server"]

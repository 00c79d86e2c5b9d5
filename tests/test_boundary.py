"""The boundary is the architecture: the code that runs beside student code imports nothing that judges (the import
contract in pyproject.toml), and the package has no import circle (a function's import counts: it is a circle all the same
once it runs)."""
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

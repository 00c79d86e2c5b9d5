"""An assignment as one declaration: its source notebooks, the topic modules its checks come from, its example
and corpus answers. The lists the rest of the course needs are read from here, never kept by hand: the names
`course` exports, the warm kernels' preloads, the test groups, the exercises of the corpus.

source/<a>/*.ipynb            the notebooks: solution cells (the exercises) and test cells (one check call each)
course/topics/<topic>.py      what a check needs (reference, cases, comparison, hints); its __all__ names what
                              `course` exports from it
examples/<a>/<student>/       example answers, one `<grade_id>.py` per solution cell (make grade grades them)
tests/corpus/<a>/cases.py     known-right and known-wrong answers with the verdicts each must get
"""
import ast
import re
from dataclasses import dataclass
from pathlib import Path

from .grading.cell_roles import cell_code, check_call, is_test_cell, solution_ids

PACKAGE = Path(__file__).resolve().parent
TOPICS = PACKAGE / "topics"
_ALL = re.compile(r"^__all__ = (\(.*?\)|\[.*?\])", re.S | re.M)


def _topic_files():
    """The topic modules' files, sorted: every course/topics/*.py but the package's __init__.py."""
    return [p for p in sorted(TOPICS.glob("*.py")) if p.stem != "__init__"]


def topic_exports():
    """{name: "topics.<module>"} for every name a topic module lists in its __all__ (read, not imported)."""
    where = {}
    for path in _topic_files():
        found = _ALL.search(path.read_text())
        for name in ast.literal_eval(found.group(1)) if found else ():
            where[name] = f"topics.{path.stem}"
    return where


def topic_modules():
    """The importable names of the topic modules, e.g. "course.topics.grayscale"."""
    return tuple(f"course.topics.{p.stem}" for p in _topic_files())


def names(root, where="source"):
    """The assignments: the folders of source/ (or where), sorted."""
    folder = Path(root) / where
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if folder.is_dir() else []


@dataclass(frozen=True)
class NotebookExercise:
    """One solution cell and the test cells after it, as a notebook declares them (the topic's side of an exercise,
    its cases and judge, is course.harness.exercise.Exercise)."""
    grade_id: str        # the solution cell's, e.g. "rgb2grey_k"
    notebook: str        # e.g. "02_L1_run_kernel"
    prefix: str          # what its test cells' grade_ids start with, e.g. "rgb2grey_pyk_"
    tests: tuple         # the rest of those grade_ids, e.g. ("tiny", "ragged_sizes", ...)
    checks: tuple        # the checks its test cells call
    functions: tuple     # the functions its solution cell defines, and the wrappers the lesson gives after it


def _defined(source):
    """The names a cell's top-level statements define or assign."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return []
    out = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return out


def _functions(source, calling=None):
    """The functions a cell defines; with calling, only those that use one of those names (a wrapper of them)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return []
    return [n.name for n in body if isinstance(n, ast.FunctionDef)
            and (calling is None or any(isinstance(m, ast.Name) and m.id in calling for m in ast.walk(n)))]


def _common_prefix(ids):
    head = ids[0]
    for other in ids[1:]:
        while not other.startswith(head):
            head = head[:-1]
    return head[:head.rfind("_") + 1]


def notebook_exercises(nb, stem):
    """The exercises of a notebook (nbformat or JSON dict), in order: each solution cell with its test cells, a test
    cell belonging to the solution cell that defines what it checks (the cell's first argument)."""
    owner, last, tests, checks, functions = {}, None, {}, {}, {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or "demo" in cell.get("metadata", {}).get("tags", []):
            continue
        source = cell_code(cell)
        if meta.get("solution"):
            last = meta["grade_id"]
            tests.setdefault(last, [])
        if is_test_cell(cell):
            try:
                check, arg, _, _ = check_call(source)
            except ValueError:
                continue  # `course release` names the cell and why it cannot be judged
            gid = owner.get(arg, last)
            if gid is not None:
                tests[gid].append(meta["grade_id"])
                checks.setdefault(gid, []).append(check)
        elif last is not None:  # a solution cell, or a wrapper the lesson gives after one
            for name in _defined(source):
                if meta.get("solution") or name not in owner:
                    owner[name] = last
            own = None if meta.get("solution") else set(functions.get(last, []))
            functions.setdefault(last, []).extend(_functions(source, own))
    out = []
    for gid, ids in tests.items():
        if ids:
            prefix = _common_prefix(ids)
            out.append(NotebookExercise(gid, stem, prefix, tuple(t[len(prefix):] for t in ids),
                                tuple(dict.fromkeys(checks[gid])), tuple(dict.fromkeys(functions.get(gid, [])))))
    return out


@dataclass(frozen=True)
class Assignment:
    """An assignment as its folders declare it."""
    name: str
    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    @property
    def notebooks(self):
        """Its source notebooks, in teaching order."""
        return sorted((self.root / "source" / self.name).glob("*.ipynb"))

    def read(self, path):
        """A notebook's JSON."""
        import json
        return json.loads(Path(path).read_text())

    def exercises(self):
        """{solution grade_id: NotebookExercise} over every notebook."""
        return {e.grade_id: e for p in self.notebooks for e in notebook_exercises(self.read(p), p.stem)}

    def checks(self):
        """{check name: [(notebook, test grade_id)]}: every check a test cell calls, and where."""
        calls = {}
        for p in self.notebooks:
            for cell in self.read(p)["cells"]:
                if is_test_cell(cell):
                    try:
                        name = check_call(cell_code(cell))[0]
                    except ValueError:
                        continue
                    calls.setdefault(name, []).append((p.stem, cell["metadata"]["nbgrader"]["grade_id"]))
        return calls

    def topics(self):
        """The topic modules its checks come from, e.g. ["course.topics.grayscale"]."""
        exports = topic_exports()
        return sorted({f"course.{exports[c]}" for c in self.checks() if c in exports})

    def students(self):
        """The example students: the folders of examples/<a>/."""
        folder = self.root / "examples" / self.name
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def release_problems(self):
        """What `course release` refuses: no notebooks, a check no topic exports, a cpp_src its topic does not declare."""
        where = f"source/{self.name}"
        if not self.notebooks:
            return [f"{where}/ holds no notebooks: write them there (or `python -m course new {self.name}`)"]
        problems, exports = [], topic_exports()
        for check, cells in sorted(self.checks().items()):
            if check not in exports:
                nb, gid = cells[0]
                problems.append(f"{where}/{nb} cell {gid} calls {check}, which no topic module exports: define it "
                                f"in course/topics/{self.name}.py and list it in that module's __all__")
        problems += self._cpp_src_problems()
        return problems

    def _cpp_src_problems(self):
        """A notebook's `cpp_src = ...` must be the byte-identical cpp_src of its topic's Exercise for that function:
        the sources `course grade` compiles ahead are built with the topic's. The value is read as compiling ahead
        reads it (any string literal, strings joined with + or in parentheses, a name bound to one earlier); one it
        cannot read, or a cell that does not parse, is a problem that names the cell."""
        import importlib
        from .grading.run.compile import statements, written_value
        from .harness.exercise import Exercise as Declared
        exports, problems = topic_exports(), []
        for p in self.notebooks:
            nb = self.read(p)
            modules = {exports[c] for e in notebook_exercises(nb, p.stem) for c in e.checks if c in exports}
            declared = [(m, v.name, v.bindings["cuda"]) for m in sorted(modules)
                        for v in vars(importlib.import_module(f"course.{m}")).values()
                        if isinstance(v, Declared) and "cuda" in v.bindings]
            if not declared:
                continue
            literals, env = [], {}
            for i, stmt in statements(nb["cells"], env):
                cell = nb["cells"][i]
                gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                where = f"source/{self.name}/{p.stem} cell {i}" + (f" ({gid})" if gid else "")
                if stmt is None:
                    if "cpp_src" in cell_code(cell):
                        problems.append(f"{where} does not parse as Python, so its cpp_src cannot be checked against "
                                        "the topic's: make the cell valid Python")
                    continue
                if not (isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "cpp_src" for t in stmt.targets)):
                    continue
                value = written_value(stmt.value, env)
                if not isinstance(value, str):
                    problems.append(f"{where}: cpp_src = {ast.unparse(stmt.value)} is not a string written out in the "
                                    "notebook, so it cannot be checked against the topic's: write it as a string "
                                    "literal (strings joined with + or in parentheses, or a name bound to one earlier)")
                else:
                    literals.append(value)
            for text in literals:
                func = re.search(r"(\w+)\s*\(", text)
                same = [(m, name, b) for m, name, b in declared if func and b.func == func.group(1)]
                if same and all(b.cpp_src != text for _, _, b in same):
                    m, name, b = same[0]
                    problems.append(f"source/{self.name}/{p.stem}: cpp_src = {text!r} differs from the cpp_src of "
                                    f"{name} in course/{m.replace('.', '/')}.py ({b.cpp_src!r}): make them "
                                    "byte-identical, or the builds compiled ahead of grading are not the ones used")
        return problems

    def repository_problems(self):
        """What the course's tests refuse: no example students, no corpus, answers for cells that do not exist."""
        problems = []
        solutions = {g for p in self.notebooks for g in solution_ids(self.read(p))}
        if not self.students():
            problems.append(f"examples/{self.name}/ has no example students: add a folder per student with one "
                            "<grade_id>.py per solution cell (a right one, a wrong one, an empty one)")
        for student in self.students():  # an answer file for no solution cell would be silently left out
            unknown = sorted(p.stem for p in (self.root / "examples" / self.name / student).glob("*.py")
                             if p.stem not in solutions)
            if unknown:
                problems.append(f"examples/{self.name}/{student}: no solution cell is called {', '.join(unknown)}")
        corpus = self.root / "tests" / "corpus" / self.name
        if not (corpus / "cases.py").is_file():
            problems.append(f"tests/corpus/{self.name}/cases.py is missing: list known-right and known-wrong answers "
                            "with the verdicts each must get (tests/test_corpus.py)")
        else:
            for folder in sorted(p for p in corpus.iterdir() if p.is_dir() and p.name != "__pycache__"):
                unknown = sorted(p.stem for p in folder.glob("*.py") if p.stem not in self.exercises())
                if unknown:
                    problems.append(f"tests/corpus/{self.name}/{folder.name}: no exercise is called {', '.join(unknown)}")
        return problems


def declared(root):
    """Every assignment of a course folder."""
    return [Assignment(n, Path(root)) for n in names(root)]


def pipeline_groups(root):
    """The pytest groups that autograde each assignment's examples, the most notebooks to grade first."""
    def notebooks_to_grade(a):
        tamper = a.root / "tests" / "tamper" / a.name
        students = len(a.students()) + (sum(p.is_dir() for p in tamper.iterdir()) if tamper.is_dir() else 0)
        return students * len(a.notebooks)
    return tuple(f"pipeline-{a.name}" for a in sorted(declared(root), key=notebooks_to_grade, reverse=True))

"""`course collect`: submissions into submitted/<student>/<assignment>/, from nbgrader's exchange or an LMS download.

An LMS download is a zip (or the folder it unpacks to) of notebooks named by student, in one of two layouts:
a folder per student (`alice/01_L0_loop.ipynb`; Moodle's `Alice Smith_123_assignsubmission_file_/...`), or
flat files whose name starts with the student and ends with the notebook (`alice_01_L0_loop.ipynb`; Canvas's
`alice_late_12345_67890_01_L0_loop-1.ipynb`). The student is the name up to its first `_`. Every file is
checked first (a notebook, of a released name, one per student and notebook); only then is anything written.
"""
import datetime
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..run.layout import CourseError, course_root, notebook_names, read_notebook, require_assignment, run_nbgrader

IGNORED = re.compile(r"(^|/)(__MACOSX|\.ipynb_checkpoints|\.DS_Store|Thumbs\.db|desktop\.ini)(/|$)|(^|/)\._")
_RESUBMITTED = re.compile(r"-\d+$")  # Canvas numbers a second upload of the same file: name-1.ipynb


@dataclass
class Item:
    """One submitted notebook found in the download."""
    origin: str     # its name in the zip or folder, for messages
    student: str
    notebook: str
    data: bytes
    timestamp: str = None  # the student's timestamp.txt, where the download has one


def student_id(text):
    """A student id from a file or folder name: up to its first `_`, spaces as '-', only letters, digits, '.', '@', '-'."""
    head = text.split("_", 1)[0].strip()
    return re.sub(r"[^A-Za-z0-9.@-]+", "-", head).strip("-.")


def _match_notebook(stem, notebooks):
    """The released notebook a file's name ends with (longest first), or None."""
    stem = _RESUBMITTED.sub("", stem)
    for nb in sorted(notebooks, key=len, reverse=True):
        if stem == nb or stem.endswith("_" + nb) or stem.endswith("-" + nb):
            return nb
    return None


def _entries(source):
    """(name, bytes) of every file in a zip or a folder; CourseError for a missing path or a corrupt zip."""
    source = Path(source)
    if not source.exists():
        raise CourseError(f"{source} does not exist: name the zip your LMS gave you, or the folder it unpacks to")
    if source.is_dir():
        return [(str(p.relative_to(source).as_posix()), p.read_bytes()) for p in sorted(source.rglob("*")) if p.is_file()]
    try:
        with zipfile.ZipFile(source) as z:
            bad = z.testzip()
            if bad is not None:
                raise CourseError(f"{source} is a corrupt zip: {bad} fails its checksum; download it again")
            return [(i.filename, z.read(i)) for i in z.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as e:
        raise CourseError(f"{source} is not a readable zip ({e}); download it again, or unpack it and name the "
                          "folder") from None


def _strip_common_top(names, notebooks):
    """Names without a top folder that all share (a zip of one folder), unless that folder is the one student's."""
    parts = [PurePosixPath(n).parts for n in names]
    if parts and all(len(p) > 1 for p in parts) and len({p[0] for p in parts}) == 1:
        inner = [PurePosixPath(*p[1:]) for p in parts]
        if any(len(p.parts) > 1 or _RESUBMITTED.sub("", p.stem) not in notebooks for p in inner
               if p.suffix == ".ipynb"):
            return [str(p) for p in inner]
    return names


def read_download(source, assignment, notebooks):
    """The Items of an LMS download, checked; CourseError listing every problem (nothing is written)."""
    entries = [(n, d) for n, d in _entries(source) if not IGNORED.search(n)]
    names = _strip_common_top([n for n, _ in entries], notebooks)
    items, problems, stamps = [], [], {}
    for (origin, data), name in zip(entries, names):
        path = PurePosixPath(name)
        parts = [p for p in path.parts[:-1] if p != assignment]
        if path.name == "timestamp.txt" and parts:  # nbgrader's record of when a student submitted
            stamps[student_id(parts[0])] = data.decode(errors="replace").strip()
            continue
        if path.suffix != ".ipynb":
            problems.append(f"{origin}: not a notebook (only .ipynb files are collected)")
            continue
        nb = _match_notebook(path.stem, notebooks)
        if parts:  # a folder per student
            student = student_id(parts[0])
        else:  # flat: the student's name, then the notebook's
            student = student_id(path.stem) if nb and path.stem != nb else ""
        if nb is None:
            problems.append(f"{origin}: no released notebook of {assignment} is called that (they are "
                            f"{', '.join(notebooks)})")
            continue
        if not student:
            problems.append(f"{origin}: no student in its name (expected <student>/{nb}.ipynb or <student>_{nb}.ipynb)")
            continue
        items.append(Item(origin, student, nb, data))
    for item in items:
        item.timestamp = stamps.get(item.student)
    seen = {}
    for item in items:
        seen.setdefault((item.student, item.notebook), []).append(item.origin)
    for (student, nb), origins in sorted(seen.items()):
        if len(origins) > 1:
            problems.append(f"{student} has {len(origins)} submissions of {nb}: {', '.join(origins)} (keep one)")
    for item in items:
        with tempfile.NamedTemporaryFile(suffix=".ipynb") as f:
            f.write(item.data)
            f.flush()
            try:
                read_notebook(f.name)
            except CourseError as e:
                problems.append(f"{item.origin}: not a Jupyter notebook ({str(e).split('(', 1)[-1].rstrip(')')})")
    if problems:
        raise CourseError(f"{source}: nothing was collected, because\n  " + "\n  ".join(problems))
    if not items:
        raise CourseError(f"{source} holds no notebooks of {assignment}")
    return items


def write_submissions(root, assignment, items, timestamp=None):
    """Writes the items into submitted/<student>/<assignment>/ (a changed earlier submission is replaced); returns the students written."""
    stamp = (timestamp or datetime.datetime.now()).strftime("%Y-%m-%d %H:%M:%S.%f")
    by_student = {}
    for item in items:
        by_student.setdefault(item.student, []).append(item)
    changed = []
    for student, mine in sorted(by_student.items()):
        dest = Path(root) / "submitted" / student / assignment
        if dest.is_dir() and {p.name: p.read_bytes() for p in dest.glob("*.ipynb")} == \
                {f"{i.notebook}.ipynb": i.data for i in mine}:
            continue  # collected before, unchanged: its timestamp stays, and so does its grade
        changed.append(student)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=dest.parent))
        for item in mine:
            (tmp / f"{item.notebook}.ipynb").write_bytes(item.data)
        (tmp / "timestamp.txt").write_text(next((i.timestamp for i in mine if i.timestamp), stamp))
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    return changed


def collect(root, assignment, source=None, exchange=False, dry_run=False):
    """Collects an assignment's submissions from an LMS download (zip or folder) or nbgrader's exchange."""
    root = course_root(root)
    require_assignment(root, assignment)
    notebooks = notebook_names(root, assignment)
    if exchange == bool(source):
        raise CourseError("name an LMS download (a zip or a folder), or pass --exchange, not both and not neither")
    if exchange:
        if dry_run:
            print("--dry-run: nbgrader collect would run now")
            return 0
        proc = run_nbgrader(["collect", assignment], root)
        print(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "collected")
        return 0
    items = read_download(source, assignment, notebooks)
    students = sorted({i.student for i in items})
    incomplete = {s: sorted(set(notebooks) - {i.notebook for i in items if i.student == s}) for s in students}
    for s, missing in incomplete.items():
        if missing:
            print(f"note: {s} submitted no {', '.join(missing)} (graded 0 there)")
    if dry_run:
        for i in items:
            print(f"{i.origin} -> submitted/{i.student}/{assignment}/{i.notebook}.ipynb")
        return 0
    changed = write_submissions(root, assignment, items)
    print(f"collected {len(items)} notebooks of {assignment} from {len(students)} students into submitted/ "
          f"({len(changed)} new or changed, {len(students) - len(changed)} as collected before)")
    return 0

"""The class's speed: per performance test, each student's time, ratios and rank (`course export`); what a student's
feedback says of their own (their time, ratio and percentile, never another student's name) is nbgrader/standing.py.

The figures come from the autograded notebooks: a speed test's cell result carries what harness/speed.py measured
(trusted.SPEED_RECORD in its metadata), written by the trusted pass, so no student code wrote them.
"""
import csv
import html
from pathlib import Path

import nbformat

from ..cell_roles import is_test_cell
from ..nbgrader.trusted import SPEED_RECORD

COLUMNS = ("test", "rank", "student", "ms", "reference_ms", "ratio_to_reference", "baseline", "ratio_to_baseline",
           "points", "max_points", "runs", "settled", "gpu", "sm_clock_mhz", "max_sm_clock_mhz", "clock")


def record_of(cell):
    """The speed figures a test cell's result carries, or None (not a speed test, or nothing measured)."""
    for out in cell.get("outputs", []):
        found = out.get("metadata", {}).get(SPEED_RECORD)
        if found and found.get("measured"):
            return found
    return None


def records(root, assignment):
    """{"notebook/grade_id": {student: figures}} of every measured speed test in the autograded notebooks."""
    found = {}
    for path in sorted(Path(root).glob(f"autograded/*/{assignment}/*.ipynb")):
        student = path.parent.parent.name
        for cell in nbformat.read(path, as_version=4).cells:
            figures = record_of(cell) if is_test_cell(cell) else None
            if figures:
                found.setdefault(f"{path.stem}/{cell.metadata['nbgrader']['grade_id']}", {})[student] = figures
    return found


def speed_tests(release, assignment):
    """"notebook/grade_id" of each speed test the released assignment holds (a check called with "speed")."""
    from ..cell_roles import check_call
    tests = []
    for path in sorted(Path(release, assignment).glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if is_test_cell(cell):
                try:
                    speed = "speed" in check_call(cell.source)[2]
                except ValueError:
                    speed = False
                if speed:
                    tests.append(f"{path.stem}/{cell.metadata['nbgrader']['grade_id']}")
    return tests


def percentile(times, mine):
    """The share (0-100) of the other timed kernels that are slower than mine; 100 when mine is the only one."""
    others = list(times)
    others.remove(mine)
    if not others:
        return 100.0
    return 100.0 * (sum(t > mine for t in others) + 0.5 * sum(t == mine for t in others)) / len(others)


def ranked(per_student):
    """[(rank, student, figures)] fastest first; equal times share a rank."""
    rows, rank, last = [], 0, None
    for k, (student, figures) in enumerate(sorted(per_student.items(), key=lambda kv: (kv[1]["ms"], kv[0])), 1):
        if figures["ms"] != last:
            rank, last = k, figures["ms"]
        rows.append((rank, student, figures))
    return rows


def table(found):
    """The leaderboard's rows (COLUMNS), test by test, fastest first."""
    out = []
    for test, per_student in found.items():
        for rank, student, f in ranked(per_student):
            base = next(iter(f.get("baselines", {}).items()), (None, None))
            gpu = f.get("gpu", {})
            out.append({"test": test, "rank": rank, "student": student, "ms": f"{f['ms']:.5g}",
                        "reference_ms": f"{f['reference_ms']:.5g}", "ratio_to_reference": f"{f['ratio']:.3f}",
                        "baseline": base[0] or "", "ratio_to_baseline": f"{f['ms'] / base[1]:.3f}" if base[1] else "",
                        "points": f"{f.get('points', 0):g}", "max_points": f"{f.get('max_points', 0):g}",
                        "runs": f["runs"], "settled": f["settled"], "gpu": gpu.get("name", ""),
                        "sm_clock_mhz": gpu.get("clocks.sm", ""), "max_sm_clock_mhz": gpu.get("clocks.max.sm", ""),
                        "clock": f.get("clock", "")})
    return out


def plot(found, path, title):
    """One panel per speed test: each student's time as a multiple of the course's kernel's, fastest first."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from ...harness.speed import FULL, ZERO
    tests = list(found)
    tallest = max(len(v) for v in found.values())
    fig, axes = plt.subplots(len(tests), 1, figsize=(9, (0.28 * tallest + 1.3) * len(tests)), squeeze=False)
    for ax, test in zip(axes[:, 0], tests):
        rows = ranked(found[test])
        ratios = [f["ratio"] for _, _, f in rows]
        ax.barh(range(len(rows)), ratios, color=["#27ae60" if r <= FULL else "#e67e22" if r < ZERO else "#c0392b"
                                                for r in ratios])
        ax.set_yticks(range(len(rows)), [f"{rank}. {student}" for rank, student, _ in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(FULL, color="grey", ls="--", lw=0.8)
        ax.axvline(ZERO, color="grey", ls=":", lw=0.8)
        ax.set_xlabel(f"time / the course's kernel's (full points left of {FULL:g}, none right of {ZERO:g})")
        ax.set_title(f"{test}", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def page(rows, title):
    """The leaderboard as an HTML page: one table, a row per student and test."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "\n".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in COLUMNS) + "</tr>" for r in rows)
    empty = "" if rows else (f"<p>No speed test was measured: speed is measured on a GPU at grading time (CPU mode "
                             f"measures nothing).</p>")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>\n<style>"
            "body{font-family:sans-serif} table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:2px 6px;"
            "font-size:13px;text-align:right}</style></head>\n"
            f"<body><h1>{html.escape(title)}</h1>\n{empty}<table><tr>{head}</tr>\n{body}\n</table></body></html>\n")


def export(root, assignment, out):
    """Writes <out>/<assignment>-speed.csv and -speed.html (and -speed.png once something was measured) for an
    assignment with speed tests; returns the files written ([] for an assignment without any)."""
    if not speed_tests(Path(root) / "release", assignment):
        return []
    found = records(root, assignment)
    rows = table(found)
    written = [out / f"{assignment}-speed.csv", out / f"{assignment}-speed.html"]
    with open(written[0], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    title = f"{assignment}: speed leaderboard"
    written[1].write_text(page(rows, title))
    if found:
        written.append(out / f"{assignment}-speed.png")
        plot(found, written[2], title)
    return written

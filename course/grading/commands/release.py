"""`course release`: release/ from source/ through nbgrader (solutions out, C stubs in), and each released CUDA stub compiled."""
import os
import time
from pathlib import Path

from ...assignments import Assignment
from ..run.compile import build_all, compile_jobs, job_key
from ..run.layout import CourseError, assignments, course_root, read_notebook, require_assignment, run_nbgrader
from ..nbgrader.trusted import needs_demo, unjudgeable


def stub_jobs(root, assignment):
    """[(notebook, job)] for each load_cuda call of the released notebooks (the C stubs, as students get them)."""
    out = []
    for path in sorted((Path(root) / "release" / assignment).glob("*.ipynb")):
        for job in compile_jobs(read_notebook(path), gpu=False):
            out.append((path.stem, job))
    return out


def release_refusals(root, a):
    """Why `course release` refuses assignment a, one message per kind of problem (empty when it can be released)."""
    missing = Assignment(a, root).release_problems()  # the declaration is whole (course/assignments.py), first
    if missing:
        return [f"assignment {a} is not fully declared:\n  " + "\n  ".join(missing)]
    out = []
    notebooks = sorted((root / "source" / a).glob("*.ipynb"))
    # every test cell must be one the judge can run (course/grading/nbgrader/trusted.py)
    problems = [f"{a}/{p.stem} cell {gid}: {why}" for p in notebooks for gid, why in unjudgeable(read_notebook(p))]
    if problems:
        out.append("these test cells cannot be judged outside the student's kernel, so they cannot be "
                   "graded:\n  " + "\n  ".join(problems) + "\nA test cell is a docstring and one call "
                   "check_...(name, literal, ...) of a check that course exports.")
    # grading skips demo cells, so nothing after one may need what only it defines
    problems = [f"{a}/{p.stem} cell {i}: uses {', '.join(used)}, defined only in a demo cell before it"
                for p in notebooks for i, used in needs_demo(read_notebook(p))]
    if problems:
        out.append("grading does not run demo cells (tagged `demo`), and these cells need what one "
                   "defines:\n  " + "\n  ".join(problems) + "\nDefine those names in a cell that is "
                   "not a demo, or take the tag off.")
    return out


def release(root, assignment=None, check_stubs=True):
    """Generates release/<assignment>/ (every assignment when None) and compiles the released CUDA stubs; 1 if one fails."""
    root = course_root(root)
    todo = [assignment] if assignment else assignments(root)
    if assignment:
        require_assignment(root, assignment)
    if not todo:
        raise CourseError(f"{root / 'source'} holds no assignments")
    for a in todo:
        refusals = release_refusals(root, a)
        if refusals:
            raise CourseError(refusals[0])
    failed = 0
    for a in todo:
        t = time.perf_counter()
        run_nbgrader(["generate_assignment", a, "--force"], root)
        names = sorted(p.name for p in (root / "release" / a).glob("*.ipynb"))
        print(f"released {a}: {len(names)} notebooks into release/{a}/ ({time.perf_counter() - t:.0f} s)")
        if not check_stubs:
            continue
        jobs = stub_jobs(root, a)
        if not jobs:
            continue
        t = time.perf_counter()
        results = build_all([j for _, j in jobs], processes=os.cpu_count())
        errors = {job_key(j): e for j, e in results}
        by_notebook = {}
        for nb, job in jobs:
            by_notebook.setdefault(nb, []).append(job)
        for nb, js in by_notebook.items():
            bad = [errors[job_key(j)] for j in js if errors.get(job_key(j))]
            if bad:
                failed += 1
                print(f"  FAILED {a}/{nb}: a released CUDA source does not compile:\n    "
                      + bad[0].strip().replace("\n", "\n    ")[:3000])
            else:
                print(f"  {a}/{nb}: {len(js)} CUDA source{'s compile' if len(js) > 1 else ' compiles'} as released")
        print(f"  (compiling took {time.perf_counter() - t:.0f} s)")
    return 1 if failed else 0

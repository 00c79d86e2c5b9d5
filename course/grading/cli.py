"""The instructor's command line: `python -m course COMMAND`, from source/ to exported grades without nbgrader's internals.

  doctor    is this machine ready to grade? (GPU, driver, nvcc, compute-sanitizer, torch, g++, a tiny kernel)
  release   release/ from source/ (all assignments or one); the C stubs must compile
  collect   submissions into submitted/: from nbgrader's exchange, or from an LMS download (a zip or a folder)
  grade     autograde what was collected, several students at once, resumable; every test judged outside the kernel
  verify    an audit of any gradebook: the clean re-run of graded submissions, listing any test that disagrees
  merge     the shards of `grade --shard i/N` into the course's gradebook
  slurm     grade on a Slurm cluster: a job array of shards, then the merge (`slurm grade`), and its report
  feedback  HTML feedback per student (hidden tests' code and seeds left out)
  export    grades as CSV, and which exercise the class failed, with which message (table and plot)
  check     an assignment tried while it is written: what release would refuse, the examples or one answer judged
  new       a new assignment to edit, declared whole: notebooks, topic module, examples, corpus skeleton
  add-test  a test cell added to a source notebook: its docstring, one check call and nbgrader's metadata
  examples  the example students' submissions written from examples/ (make grade), and their grade table
"""
import argparse
import sys

from .run.layout import CourseError


def _doctor(args):
    from .commands.doctor import doctor
    return doctor(args.root, compile_kernel=not args.quick)


def _release(args):
    from .commands.release import release
    return release(args.root, args.assignment, check_stubs=not args.no_compile)


def _collect(args):
    from .commands.collect import collect
    return collect(args.root, args.assignment, source=args.source, exchange=args.exchange, dry_run=args.dry_run)


def _grade(args):
    from .commands.grade import grade, parse_shard, report
    shard = parse_shard(args.shard) if args.shard else None
    gpus = None if args.gpus is None else [g for g in args.gpus.split(",") if g]
    summary = grade(args.root, args.assignment, students=args.student, workers=args.workers, gpus=gpus,
                    shard=shard, force=args.force, verify=args.audit, db=args.db,
                    compile_first=not args.no_compile, timeout=args.timeout, warm=not args.cold_kernels)
    print(report(summary))
    if args.json:
        import json
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1, default=str)
    return 1 if summary["failed"] or summary["disagreements"] else 0


def _verify(args):
    from .commands.verify import reverify
    return reverify(args.root, args.assignment, students=args.student, workers=args.workers)


def _merge(args):
    from .commands.merge import merge_shards
    return merge_shards(args.root, args.assignment, args.shards, db=args.db)


def _slurm(args):
    import os
    from .commands import slurm
    if args.action == "report":
        if args.sbatch:
            raise CourseError(f"slurm report takes no sbatch options: {' '.join(args.sbatch)}")
        return slurm.report(args.root, args.assignment, args.tasks, job=args.job)
    return slurm.submit(args.root, args.assignment, args.tasks, args.sbatch, cpu=args.cpu, dry_run=args.dry_run,
                        pythonpath=os.environ.get("PYTHONPATH"))


def _feedback(args):
    from .commands.feedback import feedback
    return feedback(args.root, args.assignment, students=args.student, db=args.db)


def _export(args):
    from .commands.export import export
    return export(args.root, args.assignment, out=args.out, db=args.db)


def _check(args):
    import os
    os.environ.setdefault("MPLBACKEND", "Agg")  # the notebooks' plots are not shown here
    from .commands.check import check
    return check(args.root, args.assignment, answer=args.answer, exercise=args.exercise, tests=args.case,
                 corpus=not args.no_corpus, probes=not args.no_probes)


def _new(args):
    from .run.layout import course_root
    from .commands.new import scaffold
    written = scaffold(args.root, args.assignment, rungs=args.rungs, triton=args.triton)
    root = course_root(args.root)
    print(f"wrote {len(written)} files for {args.assignment}:\n  " + "\n  ".join(str(p.relative_to(root)) for p in written))
    print(f"next: python -m course check {args.assignment} (the declaration, the examples and the corpus, nothing "
          f"released); then make it yours: course/topics/{args.assignment}.py and source/{args.assignment}/, checked "
          f"as you go (docs/writing-an-assignment.md)")


def _add_test(args):
    from .commands.add_test import add_test
    grade_id, at = add_test(args.root, args.assignment, args.notebook, args.call, args.doc, points=args.points,
                            test_id=args.id, hidden=args.hidden)
    print(f"added test cell {grade_id} ({args.points} point{'s' if args.points != 1 else ''}) as cell {at} of "
          f"source/{args.assignment}/{args.notebook.removesuffix('.ipynb')}.ipynb; next: python -m course check "
          f"{args.assignment}, then python -m course release {args.assignment} (release/ follows source/)")


def _examples(args):
    from .run.layout import course_root, db_url, require_assignment
    root = course_root(args.root)
    require_assignment(root, args.assignment)
    if args.table:
        from .run.gradebook import grade_table
        print(grade_table(db_url(root, args.db), args.assignment, root / "release"))
        return
    from .commands.examples import write_submissions
    try:
        students = write_submissions(root / "examples", root / "release", root / "submitted", args.assignment)
    except (FileNotFoundError, ValueError) as e:
        raise CourseError(str(e)) from None
    print(f"wrote submissions of {args.assignment} for {', '.join(students)} into submitted/")


def parser():
    """The argument parser: one subcommand per step of the instructor's work."""
    p = argparse.ArgumentParser(prog="python -m course", description=__doc__.split("\n\n")[0],
                                epilog="Each command has --help. Run them in the course folder (or pass --root).",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def command(name, func, help, assignment="required"):
        c = sub.add_parser(name, help=help, description=help)
        c.add_argument("--root", default=".", help="the course folder (holds nbgrader_config.py and source/)")
        if assignment == "required":
            c.add_argument("assignment", help="the assignment, a folder of source/ (e.g. grayscale)")
        elif assignment == "optional":
            c.add_argument("assignment", nargs="?", help="one assignment (default: all of source/)")
        c.set_defaults(func=func)
        return c

    c = command("doctor", _doctor, "Checks that this machine can grade: GPU and driver, nvcc, compute-sanitizer, torch "
                "and its CUDA, ninja, g++, and a tiny kernel compiled and run (CPU mode where there is no GPU); each "
                "failure says how to fix it.", assignment=None)
    c.add_argument("--quick", action="store_true", help="skip compiling and running the tiny kernel")

    c = command("release", _release, "Generates release/ from source/ through nbgrader (solutions out, C stubs in) "
                "and checks that each released CUDA stub compiles.", assignment="optional")
    c.add_argument("--no-compile", action="store_true", help="skip compiling the released CUDA stubs")

    c = command("collect", _collect, "Puts submissions into submitted/<student>/<assignment>/: from nbgrader's "
                "exchange (--exchange), or from an LMS download: a zip or folder of notebooks named by student "
                "(alice/01_L0_loop.ipynb, or alice_01_L0_loop.ipynb as Canvas and Moodle name them). Everything "
                "is checked before anything is written.")
    c.add_argument("source", nargs="?", help="the LMS download: a .zip file or a folder")
    c.add_argument("--exchange", action="store_true", help="collect from nbgrader's exchange (nbgrader collect)")
    c.add_argument("--dry-run", action="store_true", help="check and list what would be collected, write nothing")

    c = command("grade", _grade, "Autogrades every collected submission through nbgrader, several students at once "
                "(a pool of workers per GPU), with a progress bar; resumable: a student graded before is graded "
                "again only when their submission, the tests or the grading code changed. A submission whose "
                "grading breaks is recorded with the reason and grading goes on. Every test cell is judged by "
                "nbgrader's own process, never by the student's kernel (course/grading/nbgrader/trusted.py): one trusted pass.")
    c.add_argument("--student", action="append", help="only this student (repeatable)")
    c.add_argument("--workers", type=int, help="students graded at once (default: one per core)")
    c.add_argument("--gpus", help="GPU indices to use, e.g. 0,1 (default: all nvidia-smi lists; '' for none)")
    c.add_argument("--shard", help="grade only shard i of N (i/N), into its own gradebook; `course merge` joins them")
    c.add_argument("--force", action="store_true", help="grade again students whose inputs did not change")
    c.add_argument("--audit", action="store_true", help="also re-run each submission in clean processes (course "
                   "verify) and list any test whose verdict differs")
    c.add_argument("--no-compile", action="store_true", help="do not compile the CUDA sources ahead")
    c.add_argument("--cold-kernels", action="store_true",
                   help="start each notebook's kernel as nbgrader does, not forked from a warm process")
    c.add_argument("--timeout", type=int, default=3 * 3600, help="seconds one student's grading may take")
    c.add_argument("--db", help="the gradebook (default: gradebook.db in the course folder)")
    c.add_argument("--json", help="also write the run's summary and timings to this JSON file")

    c = command("verify", _verify, "Re-runs graded submissions in clean processes, each with the student's own "
                "hidden cases, and lists every test whose verdict differs from the autograded notebook.")
    c.add_argument("--student", action="append", help="only this student (repeatable)")
    c.add_argument("--workers", type=int, help="students re-run at once (default: half the cores)")

    c = command("merge", _merge, "Merges the shards of `grade --shard i/N` into the course's gradebook: shards "
                "graded in this folder, and course folders of other hosts named here.")
    c.add_argument("shards", nargs="*", help="course folders of other hosts that graded shards (default: this one)")
    c.add_argument("--db", help="the gradebook (default: gradebook.db in the course folder)")

    c = command("slurm", _slurm, "Grades on a Slurm cluster (the course folder on its shared file system): `slurm "
                "grade` writes slurm/ASSIGNMENT/grade.sh and merge.sh and submits a job array of N shards (`course "
                "grade --shard i/N`, one GPU each) and the merge after it, which reports the shards that did not "
                "finish with their students; submitting again grades only the students not graded yet.",
                assignment=None)
    c.add_argument("action", choices=("grade", "report"), help="grade: write and submit the jobs; report: "
                   "what the merge job runs after `course merge` (slurm/ASSIGNMENT/report.txt)")
    c.add_argument("assignment", help="the assignment, a folder of source/ (e.g. grayscale)")
    c.add_argument("--tasks", type=int, required=True, help="shards, one array task each (keep N when submitting "
                   "again)")
    c.add_argument("--cpu", action="store_true", help="no --gres=gpu:1, COURSE_CPU_MODE=1: for a partition without "
                   "GPUs")
    c.add_argument("--dry-run", action="store_true", help="write the batch scripts, submit nothing")
    c.add_argument("--job", help="report: the job array's id (Slurm's state of each task)")
    c.allow_abbrev = False  # the rest is sbatch's: its --time is not --tasks, nor anything of ours
    c.epilog = ("Any other option is sbatch's, for the shards (--partition, --account and --qos also for the merge): "
                "python -m course slurm grade grayscale --tasks 8 --time=2:00:00 --cpus-per-task=8")

    c = command("feedback", _feedback, "Writes feedback/<student>/<assignment>/*.html: each test with its verdict "
                "and message; hidden tests' code and seeds left out.")
    c.add_argument("--student", action="append", help="only this student (repeatable)")
    c.add_argument("--db", help="the gradebook (default: gradebook.db in the course folder)")

    c = command("export", _export, "Writes the grades as CSV and a per-exercise pass-rate table (with the commonest "
                "failure message of each) and plot.")
    c.add_argument("--out", default="exports", help="the folder to write into (default: exports/)")
    c.add_argument("--db", help="the gradebook (default: gradebook.db in the course folder)")

    c = command("check", _check, "Tries an assignment while it is written, releasing and grading nothing: what `course "
                "release` would refuse, then each example student's answers run through their exercises' checks (the "
                "losses compared with examples/NAME/expected.json where it exists) and the corpus; with --answer, one answer's tests, "
                "each with its verdict and message. Answers run in this process as the corpus runs them: a trial, "
                "not a grade.")
    c.add_argument("--answer", help="a solution cell's code (<grade_id>.py), a folder of them, or a notebook")
    c.add_argument("--exercise", help="the solution cell's grade_id the answer fills (default: the file's name)")
    c.add_argument("--case", action="append", help="only this test, e.g. tiny (repeatable; speed runs only so)")
    c.add_argument("--no-corpus", action="store_true", help="leave out the corpus (tests/corpus/NAME/), which runs "
                   "last")
    c.add_argument("--no-probes", action="store_true", help="leave out trying the memory and race checks on the "
                   "solutions with a guard or a barrier taken out (whether their sizes can show what they look for)")

    c = command("new", _new, "Writes a new assignment to edit, declared whole: a notebook per rung in source/NAME/ "
                "(reference, exercise, checks), course/topics/NAME.py (cases, comparison, hints), example students "
                "in examples/NAME/ and a corpus skeleton in tests/corpus/NAME/. As written it is SAXPY (out = a*x + "
                "y) and releases and grades at once.")
    c.add_argument("--rungs", type=int, default=4, help="how many rungs: 1 (the Python loop) to 4 (up to CUDA C)")
    c.add_argument("--triton", action="store_true", help="add the Triton rung after CUDA C (05_L4_triton: a "
                   "@triton.jit kernel and its launch function, its check, its examples and corpus answers); needs "
                   "all 4 rungs")

    c = command("add-test", _add_test, "Adds a test cell to a source notebook, after its exercise's other tests: a "
                "docstring the student reads, one check call, and nbgrader's metadata (graded, locked, points, a "
                "grade_id from the exercise's prefix). Refused, and nothing written, where the grader could not run it.")
    c.add_argument("notebook", help="the source notebook, e.g. 02_L1_run_kernel")
    c.add_argument("call", help="the check call, e.g. 'check_rgb2grey(rgb2grey_pyk, \"tiny\")'")
    c.add_argument("--doc", required=True, help="what the test checks, one sentence (its docstring)")
    c.add_argument("--points", type=int, default=1, help="its points (default 1)")
    c.add_argument("--id", help="its grade_id after the exercise's prefix (default: the case the call names)")
    c.add_argument("--hidden", action="store_true", help="hide the call from students (the call needs a seed=N: "
                   "each student gets their own inputs)")

    c = command("examples", _examples, "Writes submitted/<student>/<assignment>/ for each example student of "
                "examples/<assignment>/ (their answers in the released notebooks), to grade as a class; --table "
                "prints the grade table instead.")
    c.add_argument("--table", action="store_true", help="print the gradebook's table of every test and student")
    c.add_argument("--db", help="the gradebook (default: gradebook.db in the course folder)")
    return p


def main(argv=None):
    """Runs one command; bad input is an error message and exit status 2, with nothing changed."""
    p = parser()
    args, rest = p.parse_known_args(argv)
    if rest and args.command != "slurm":  # only `slurm grade` passes options on (to sbatch)
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    args.sbatch = rest
    import signal

    def terminated(signum, frame):
        raise KeyboardInterrupt  # the same clean stop as Ctrl-C: running students stopped, finished ones kept
    signal.signal(signal.SIGTERM, terminated)
    # A background job of a script (`course grade ... &`, CI) starts with SIGINT ignored, and Python then leaves
    # it ignored: Ctrl-C or `kill -INT` would not stop a class halfway. Stop on it all the same.
    signal.signal(signal.SIGINT, terminated)
    try:
        return args.func(args) or 0
    except CourseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stopped; what finished is kept (`course grade` goes on where it stopped)", file=sys.stderr)
        return 130

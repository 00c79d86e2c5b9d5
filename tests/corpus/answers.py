"""What every topic's corpus (tests/corpus/<assignment>/cases.py) declares its answers with."""
from dataclasses import dataclass, field

from course.assignments import Assignment
from tests.support import ROOT


@dataclass(frozen=True)
class Case:
    exercise: str   # grade_id of the solution cell the answer fills (the file name)
    what: str       # one line: the mistake, or for a right answer its style
    fails: dict = field(default_factory=dict)   # test -> a phrase its failure message must contain (or ANY); every test not named must pass
    gpu: dict = None   # where the verdicts differ between modes: those on a GPU ...
    cpu: dict = None   # ... and those in CPU mode (fails is then unused)


ANY = None  # a test whose verdict depends on what the GPU happens to do (what lies past a tensor, which write lands
# last): passing and failing are both right; only in a case's gpu verdicts


def tests_of(assignment, exercise):
    """The tests of an exercise, as its notebook names them (the grade_ids of its test cells, less their prefix), but
    its speed test: the corpus judges correctness; tests/speed's attacks and tests/test_speed.py judge the timing."""
    return tuple(t for t in Assignment(assignment, ROOT).exercises()[exercise].tests if t != "speed")


def every(tests, phrase, but=(), **special):
    """{test: phrase} for each of tests except those in but; special gives some tests another phrase."""
    out = {t: phrase for t in tests if t not in but}
    out.update(special)
    return out

"""An exercise as data: the inputs of each named case, the judge that compares an answer, its output's dtype."""
from dataclasses import dataclass, field
import functools
from typing import Any, Callable

import torch

from .cells import refuse_stale
from .. import sandbox


@dataclass(frozen=True)
class Case:
    """One input of a check: how messages name it, and the arguments the student's function gets."""
    where: str
    args: tuple
    words: dict = field(default_factory=dict)  # the lesson's names for hints: the runner's rung, the student's own names


WORK = {  # Exercise.work: what the facts about a wrong element and the runners' hints take a thread to own
    "element": "thread i writes output element i (a 2D launch: the row from y, the column from x)",
    "row": "thread i writes row i of a 2D output (a row-wise kernel: a softmax, a normalisation)",
    "block_row": "block b writes row b of the output, its threads splitting the row (a shared-memory reduction per "
                 "row): the facts name the block, not a thread",
    "shared": "threads add into elements others add to (a histogram, a reduction): no element has a thread of its own",
}


@dataclass(frozen=True)
class Exercise:
    """What a topic declares for one exercise; the runners do the rest for every topic alike."""
    name: str                                    # e.g. "rgb2grey", for messages
    topic: str                                   # the module that defines it, e.g. "course.topics.grayscale"
    cases: Callable[[str, Any, Any], list]       # (case, seed, Rung) -> [Case]
    case_names: dict                             # a rung's sizes key -> the case names it takes
    judge: Callable[..., None]                   # (yours, case, what, *seen) -> None or AssertionError; seen: unwritten
    out_dtype: torch.dtype = None                # a tensor output's; None where the answer is not a tensor
    out_numel: Callable[[Case], int] = None      # elements of the right output for a case
    probe: str = "ragged"                        # the case that the memory, race and integrity checks run
    edges: tuple = ()                            # the memory check's cases besides the probe: where lanes or threads
    #                                              run furthest past a tensor (the smallest input, one row, one column)
    hints: dict = field(default_factory=dict)    # memory, race, computes: the runners' hints in the topic's words
    raised: Callable[..., None] = None           # (error, case, what): returns where raising is the right answer
    passed: dict = field(default_factory=dict)   # case -> what its pass line adds
    bindings: dict = field(default_factory=dict)  # rung name -> what its runner needs (cuda.Binding)
    speed: dict = field(default_factory=dict)    # rung name -> its performance test (harness/speed.py's Speed)
    one_thread: dict = field(default_factory=dict)  # a Python kernel's share of the output (harness/contract.py):
                                                 # element: (one, many) as messages name it; default one element
                                                 # per thread index
    work: Any = "element"                        # how the lesson's kernel gives its threads the output (WORK), or
    #                                              {rung name: that} where the rungs differ ("element" for the others)

    def __post_init__(self):
        kinds = self.work.values() if isinstance(self.work, dict) else [self.work]
        bad = [k for k in kinds if k not in WORK]
        if bad:
            raise ValueError(f"Exercise {self.name}: work={self.work!r}; choose one of {', '.join(WORK)} (or a dict of "
                             "rung name to one)")

    def work_on(self, rung):
        """The WORK kind of the lesson's kernel on a rung ("python", "cuda", "triton")."""
        return self.work.get(rung, "element") if isinstance(self.work, dict) else self.work

    def threads_for(self, case, out, rung="python"):
        """The threads the lesson's kernel needs for a case, its output tensor out (WORK); None where that says nothing."""
        work = self.work_on(rung)
        if work == "row" and isinstance(out, torch.Tensor) and out.dim() == 2:
            return out.shape[0]
        return self.out_numel(case) if work in ("element", "row") else None

    def inputs(self, case, seed, rung):
        """The cases of a named input case for a Rung (harness/rungs.py), with a clear error for an unknown name or a missing seed."""
        require_case(case, self.case_names[rung.sizes])
        if case == "random" and seed is None:
            raise ValueError("the random case needs a seed: check_...(fn, 'random', seed=1234)")
        return self.cases(case, seed, rung)

    def probed(self, mode):
        """The case names a check mode runs (the memory check: the probe, then the edges), e.g. ("ragged", "tiny")."""
        return (self.probe, *self.edges) if mode == "memory" else (self.probe,)

    def probes(self, mode, seed, rung):
        """The Cases a check mode runs for a Rung (memory, race, integrity): those of each of its probed case names."""
        return [c for name in self.probed(mode) for c in self.inputs(name, seed, rung)]

    def probed_words(self, mode):
        """How messages name the sizes a check mode runs: "ragged", or "ragged, tiny and tall_wide"."""
        names = self.probed(mode)
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def exercise_named(key):
    """The Exercise a job names by (topic module, exercise name)."""
    import importlib
    topic, name = key
    return next(v for v in vars(importlib.import_module(topic)).values() if isinstance(v, Exercise) and v.name == name)


def require_case(case, names):
    """ValueError unless case is one of a check's case names, listing them."""
    if case not in names:
        raise ValueError(f"unknown case {case!r}; choose one of {list(names)}")


def fill_byte(dtype):
    """The byte an output is filled with before the student's code runs: NaN for floats, 171 otherwise."""
    return 0xFF if dtype.is_floating_point else 0xAB


def unwritten(yours):
    """Where a tensor still holds the fill pattern of its dtype, element by element (evidence it was never written)."""
    if not isinstance(yours, torch.Tensor) or yours.dtype == torch.bool or yours.numel() == 0:
        return None
    raw = yours.detach().cpu().contiguous().reshape(-1).view(torch.uint8).view(yours.numel(), yours.element_size())
    return (raw == fill_byte(yours.dtype)).all(dim=1).view(yours.shape)


def same(a, b):
    """True when two tensors hold the same bits (NaN equals NaN here, unlike ==)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)) if a.numel() else True


def at_element(message, element, case=0):
    """A verdict on wrong output elements: an AssertionError (what a student reads it as) whose element is the first
    wrong one's flat index (harness/origin.py says where it comes from) and case which input of the check it was."""
    error = AssertionError(message)
    error.element, error.case = element, case
    return error


def element_of(error):
    """The first wrong element a verdict names (at_element), or None."""
    return getattr(error, "element", None)


def wrong_elements(message, bad):
    """The verdict for the wrong elements where bad holds True, naming the first one."""
    return at_element(message, int(bad.reshape(-1).nonzero()[0]))


def first(mask, names=("row", "col")):
    """The first True position of mask: its index and words for it, e.g. ([2, 5], "row 2, col 5")."""
    idx = mask.nonzero()[0].tolist()
    return idx, ", ".join(f"{n} {i}" for n, i in zip(names, idx))


def expect_tensor(yours, what, where, shape, dtype, advice):
    """Raises AssertionError unless yours is a tensor of this shape and dtype; advice says how to get there."""
    if not isinstance(yours, torch.Tensor):
        raise AssertionError(f"{what} returned {type(yours).__name__}, not a tensor, for {where}. "
                             f"Hint: return the output tensor{advice.get('return', '')}.")
    if tuple(yours.shape) != tuple(shape):
        raise AssertionError(f"{what} returned shape {tuple(yours.shape)} for {where}; expected {tuple(shape)}. "
                             f"Hint: {advice['shape']}")
    if yours.dtype != dtype:
        raise AssertionError(f"{what} returned dtype {yours.dtype} for {where}; expected {dtype}. "
                             f"Hint: {advice['dtype']}")


def split_hint(text):
    """A verdict's message as (what is wrong, its hint or None): the hint is what follows its last "\nHint: "."""
    head, _, hint = text.rpartition("\nHint: ")
    return (head, hint) if head else (text, None)


def with_hint(error, hint):
    """error's message with its hint replaced by hint."""
    head, _ = split_hint(str(error))
    if element_of(error) is not None:
        return at_element(f"{head}\nHint: {hint}", error.element, error.case)
    return AssertionError(f"{head}\nHint: {hint}")


def order_hint(exercise):
    """The hint for an answer that changes with the order a block's threads run in, in the exercise's words."""
    race = exercise.hints["race"]
    return ("it gives other answers when the threads of each block run in another order: that is a race on shared "
            f"memory. {race[0].upper()}{race[1:]}")


def judges(kind):
    """Marks a check with what its first argument is, for the judge and `course verify`: a Rung's answer, or an Answer
    (harness/rungs.py); refuses an answer that a notebook cell's failed run left behind (cells.py); and shows its
    failure as the student's call and the message, without the course's frames (pytest and IPython skip a frame
    holding __tracebackhide__; the frames below it are cut)."""
    answer = getattr(kind, "answer", kind)
    def mark(check):
        @functools.wraps(check)
        def checked(*args, **kwargs):
            __tracebackhide__ = True  # noqa: F841
            try:
                if args:  # an answer a failed cell left behind is not judged (cells.py): said instead
                    refuse_stale(check.__name__, args[0])
                if getattr(kind, "children", False) and not sandbox.children_reach_gpu():
                    named = getattr(args[0], "__name__", None) if args else None  # as "passed" names it
                    print(f"{named or check.__name__}: not run in the graded notebook's kernel (its sandbox gives the GPU to no "
                          "process it starts); the grader judges this answer itself")
                    return None
                return check(*args, **kwargs)
            except AssertionError as verdict:
                raise verdict.with_traceback(None) from None  # what is wrong with the answer: the message
        checked.__code__ = checked.__code__.replace(co_name=check.__name__, co_qualname=check.__qualname__)  # its frame's name
        checked.answer, checked.answer_kind = answer, answer.name
        return checked
    return mark

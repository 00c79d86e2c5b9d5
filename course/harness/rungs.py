"""A rung as a plug-in: what a check needs to know about where an answer runs, declared once per rung.

Topics, the harness and grading ask a Rung (or its Answer) instead of comparing rung names. Where each part is read:

sizes, small   Exercise.inputs picks the case names by sizes; a topic's cases(case, seed, rung) pick their size
               table by rung.sizes and small inputs by rung.small (topics/*.py, grading/scaffold.py's template)
runner         Rung.check(exercise, answer, case, seed): python.py's check_python, cuda.py's check_cuda, triton.py's
               check_triton (which runs its children through cuda.py's run_and_judge, with its own loader and verdict)
modes          the checks beyond input cases that the runner offers (cuda.py: memory, race, integrity)
own_kernels    the integrity rule's question, which kernels are the student's (cuda.py's verdict, in the judge
               child; CUDA: nvcc's host stub of each __global__ function, integrity.module_kernels; Triton: the
               @triton.jit functions of the answer's file)
answer         exercise.judges marks a check with it; grading/trusted.py's judge_cell collects the answer with
               Answer.collect (verify.py's clean re-runs too), and keeps the notebook's own message where
               Answer.kernel_message (a Python rung's hints read the student's kernel and what the runners did)
Exercise.bindings[rung name]   what a runner needs from an exercise beyond the shared fields (cuda.py's Binding:
               the C++ function the module exports and its declaration; triton.py's Launch: the launch function's
               name and the memory hint in Triton's words)

The Python runners' evidence is a record per call (ladder.recording: threads, launches, shared memory use, the
order of a block's threads) that python.py's call_recorded returns and check_python hands back. Still outside the
Rung: grading/trusted.py's worker side (answer) knows the requests by name ("collect" runs a rung's own function
on the notebook's value, in the worker: Triton's source of a launch function) and relays a record's shared
memory use and thread order itself; hints speak a rung's vocabulary through case.words["lang"] (the rung's name:
"python", "cuda", "triton").
"""
from dataclasses import dataclass
import importlib
from typing import Callable

from . import integrity


@dataclass(frozen=True)
class Answer:
    """What a test cell's check judges, and how the trusted judge collects it from the notebook's kernel."""
    name: str                         # the check's answer_kind: "python", "cuda", "value", "triton"
    collect: Callable                 # (answers, target name) -> the answer the check is called with
    kernel_message: bool = False      # a failed check shows the message the notebook's own run of the cell gives


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: its size table, its runner, its check modes and integrity rule, its answers."""
    name: str
    sizes: str                        # the key of case_names and of the topics' size tables
    small: bool                       # its cases stay small: every element costs a Python call
    runner: Callable                  # (exercise, answer, case, seed, **options) -> None or AssertionError
    answer: Answer
    modes: tuple = ()                 # check modes beyond input cases
    own_kernels: Callable = None      # (built file) -> names of the student's kernels in it, None if unreadable

    def check(self, exercise, answer, case, seed=None, **options):
        """Runs the rung's check of an answer on one case of an exercise."""
        return self.runner(exercise, answer, case, seed, **options)


def imported(path):
    """A function named "module:function", imported at its first call (the runners import this module)."""
    def call(*args, **kwargs):
        module, name = path.split(":")
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    call.__name__ = path
    return call


def _function(answers, target):
    return answers.function(target)


def _source(answers, target):
    source = answers.value("cuda_src", target)
    if not isinstance(source, str):
        raise AssertionError("the notebook holds no cuda_src to check")
    return source


def _value(answers, target):
    return answers.value("value", target)


FUNCTION = Answer("python", _function, kernel_message=True)  # a stand-in that calls the function in the kernel
SOURCE = Answer("cuda", _source)                             # cuda_src as text, built and run by the judge
VALUE = Answer("value", _value)                              # the value itself
TRITON_SOURCE = Answer("triton", imported("course.harness.triton:collect"))  # a launch function's source, run by the judge
ANSWERS = {a.name: a for a in (FUNCTION, SOURCE, VALUE, TRITON_SOURCE)}

PYTHON = Rung("python", sizes="python", small=True, runner=imported("course.harness.python:check_python"),
              answer=FUNCTION)
CUDA = Rung("cuda", sizes="cuda", small=False, runner=imported("course.harness.cuda:check_cuda"), answer=SOURCE,
            modes=("memory", "race", "integrity"), own_kernels=integrity.module_kernels)
TRITON = Rung("triton", sizes="triton", small=False, runner=imported("course.harness.triton:check_triton"),
              answer=TRITON_SOURCE, modes=("memory", "integrity"), own_kernels=imported("course.harness.triton:jit_names"))
RUNGS = {r.name: r for r in (PYTHON, CUDA, TRITON)}

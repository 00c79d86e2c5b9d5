"""A rung as a plug-in: what a check needs to know about where an answer runs, declared once per rung.

Topics, the harness and grading ask a Rung (or its Answer) instead of comparing rung names:

- sizes: the key of an exercise's case_names and of a topic's size tables ("python" for every interpreted
  rung); small: whether its cases stay small (a Python loop per element), the one question a topic's cases ask;
- runner: how a check runs an answer on an exercise's case (harness/python.py's check_python,
  harness/cuda.py's check_cuda);
- modes: the check modes beyond input cases that the runner offers (memory, race, integrity), and own_kernels,
  how the integrity rule tells the student's kernels apart (CUDA: nvcc's host stub of each __global__ function);
- answer: how the trusted judge (grading/trusted.py) collects the answer a test cell names from the notebook's
  kernel, and whether a failed check's message is the one the notebook itself shows (a Python rung's hints read
  the student's kernel and what the runners did, which only the notebook's kernel holds).

What a runner needs from an exercise beyond the shared fields (CUDA: the exported function and its declaration,
harness/cuda.py's Binding) is declared in Exercise.bindings under the rung's name.

Still outside the Rung: the Python runners' evidence (ladder.ran, shared_use, thread_order) travels in module
globals, carried by hand across the judge and the worker (grading/trusted.py's answer and Answers.function), and
hints speak a rung's vocabulary through case.words["lang"].
"""
from dataclasses import dataclass
import importlib
from typing import Callable

from . import integrity


@dataclass(frozen=True)
class Answer:
    """What a test cell's check judges, and how the trusted judge collects it from the notebook's kernel."""
    name: str                         # the check's answer_kind: "python", "cuda", "value"
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
ANSWERS = {a.name: a for a in (FUNCTION, SOURCE, VALUE)}

PYTHON = Rung("python", sizes="python", small=True, runner=imported("course.harness.python:check_python"),
              answer=FUNCTION)
CUDA = Rung("cuda", sizes="cuda", small=False, runner=imported("course.harness.cuda:check_cuda"), answer=SOURCE,
            modes=("memory", "race", "integrity"), own_kernels=integrity.module_kernels)
RUNGS = {r.name: r for r in (PYTHON, CUDA)}

"""Your next kernel's L0 (drills/08): the check runs your examples and compares your loop with your PyTorch reference.

The algorithm is yours, so the check cannot know its answer: it runs the function you give it, which returns
(inputs, your L0's output, your reference's output) for each example, and asserts the two outputs agree on every
example, that there are at least two examples of different shapes, and that the loop wrote every element.
"""
import torch

from ..harness.exercise import expect_tensor, first, judges, require_case, unwritten, wrong_elements
from ..harness.python import call_quietly
from ..harness.rungs import PYTHON

__all__ = ("check_plan_l0",)

RTOL, ATOL = 1e-4, 1e-5  # float outputs: a loop and PyTorch may add in other orders; integers and bools: exactly
SECONDS = 120  # all examples together: a Python loop over a few thousand elements takes seconds


def _shape(args):
    return tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else type(a).__name__ for a in args)


def judge_examples(examples, what):
    """Asserts each (inputs, l0 output, reference output) agrees, with two or more examples of different shapes."""
    triples = isinstance(examples, (list, tuple)) and all(isinstance(e, (list, tuple)) and len(e) == 3 for e in examples)
    if not triples:
        raise AssertionError(f"{what} returned {type(examples).__name__}, not a list of (inputs, L0's output, the "
                             "reference's output).\nHint: keep the given body of my_examples: it builds that list.")
    if len(examples) < 2:
        raise AssertionError(f"{what} gave {len(examples)} example(s); the plan needs at least two.\nHint: make "
                             "my_inputs() return two or more input tuples, one of an awkward size (not a multiple "
                             "of a block, a single row, ...).")
    shapes = {_shape(args if isinstance(args, (list, tuple)) else (args,)) for args, _, _ in examples}
    if len(shapes) < 2:
        raise AssertionError(f"all {len(examples)} examples of {what} have the same shapes {shapes.pop()}.\nHint: give "
                             "at least one example another size: the edges (ragged sizes, one row, one element) are "
                             "where a kernel goes wrong.")
    for k, (args, mine, ref) in enumerate(examples):
        where = f"example {k} (inputs of shapes {_shape(args if isinstance(args, (list, tuple)) else (args,))})"
        if not isinstance(mine, torch.Tensor) or not isinstance(ref, torch.Tensor):
            raise AssertionError(f"for {where} your L0 returned {type(mine).__name__} and your reference "
                                 f"{type(ref).__name__}; both must return tensors.\nHint: return the output tensor.")
        expect_tensor(mine, "your L0", where, ref.shape, ref.dtype, {
            "shape": "the expected shape is your reference's: your L0 must give the same.",
            "dtype": "the expected dtype is your reference's: your L0 must give the same."})
        never = unwritten(mine)
        if never is not None and bool(never.any()) and not bool(unwritten(ref).any()):
            raise wrong_elements(f"for {where} your L0 left {int(never.sum()):,} of {mine.numel():,} elements "
                                 f"unwritten (the first at index {first(never)[0]}: it still holds what torch.empty "
                                 "handed out).\nHint: the loop must write every output element.", never)
        if mine.dtype.is_floating_point or mine.dtype.is_complex:
            ok = torch.allclose(mine.double(), ref.double(), rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            ok = torch.equal(mine, ref)
        if not ok:
            bad = ~torch.isclose(mine.double(), ref.double(), rtol=RTOL, atol=ATOL, equal_nan=True) \
                if mine.dtype.is_floating_point else mine != ref
            idx, _ = first(bad)
            raise wrong_elements(f"for {where} your L0 and your reference differ on {int(bad.sum()):,} of "
                                 f"{mine.numel():,} elements; the first at index {idx}: L0 {mine[tuple(idx)].item()}, "
                                 f"reference {ref[tuple(idx)].item()} (floats may differ by {RTOL:g} relative + "
                                 f"{ATOL:g}).\nHint: run both on that example and print the element's inputs.", bad)


@judges(PYTHON)
def check_plan_l0(fn, case="examples"):
    """Runs fn() (your my_examples) and checks that your L0 agrees with your reference on every example."""
    require_case(case, ("examples",))
    what = getattr(fn, "__name__", "your function")
    examples = call_quietly(fn, (), what, "your examples", seconds=SECONDS)
    judge_examples(examples, what)
    print(f"{what}: {len(examples)} examples, your L0 agrees with your reference: passed")

"""The benchmarks' own kernels are right before they are timed (the notebooks' kernels are checked where they are taught), and
the benchmarks stand on the course alone, never on the tests."""
import ast
from pathlib import Path

import torch

from benchmarks import matmul as bench
from course import device, load_cuda


def test_the_matmul_benchmarks_own_kernel_is_right_on_ragged_shapes():
    own = {name: spec for name, spec in bench.KERNELS.items() if spec[0] is None}
    assert own, "the benchmark measures a kernel of its own"
    for name, (_, var, func, extra) in own.items():
        src = getattr(bench, var)
        module = load_cuda(src, bench.declaration(src, func), [func])
        for h, k, w in [(1, 1, 1), (37, 53, 29), (130, 67, 131), (5, 784, 10)]:
            a, b = torch.randn(h, k), torch.randn(k, w)
            got = getattr(module, func)(a.to(device()), b.to(device()), *extra).cpu().double()
            assert (got - a.double() @ b.double()).abs().max() < 1e-3, (name, (h, k, w))


def test_the_matmul_benchmark_times_the_triton_lessons_own_kernel_in_float32():
    from course.harness.evidence import tf32_dots
    text = bench.TRITON_SRC.text
    assert "@triton.jit\ndef matmul_kernel(" in text and 'tl.dot(a, b, input_precision="ieee")' in text
    assert not tf32_dots(text)


def test_no_benchmark_imports_from_the_tests():
    for path in sorted((Path(__file__).resolve().parent.parent / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module] + \
            [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m == "tests" or m.startswith("tests.")], path.name

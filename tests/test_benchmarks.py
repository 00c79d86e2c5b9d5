"""The benchmarks' own kernels are right before they are timed (the notebooks' kernels are checked where they are taught), and
the benchmarks stand on the course alone, never on the tests."""
import ast

import torch

from benchmarks import matmul as bench
from course import device, load_cuda
from tests.support import ROOT


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
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module] + \
            [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m == "tests" or m.startswith("tests.")], path.name


def test_the_grading_benchmark_charges_each_check_phase_to_the_cell_it_ran_in(tmp_path):
    import json
    from benchmarks.grading import check_phases
    marks = [(0.0, 1, "cell judged", "big"), (0.1, 1, "ask", "function"), (0.3, 1, "answered", "function"),
             (0.4, 1, "run asked", "c1"), (1.4, 7, "run started", "c1"), (1.5, 7, "run loaded", "c1"),
             (3.5, 7, "run ran", "c1"), (3.6, 7, "run saved", "c1"), (3.7, 1, "run ended", "c1"),
             (3.7, 1, "judge asked", "c1"), (3.8, 9, "judge started", "c1"), (4.8, 9, "judge done", "c1"),
             (4.9, 1, "judge ended", "c1"), (5.0, 1, "cell done", "big"),
             (6.0, 1, "cell judged", "small"), (6.5, 1, "cell done", "small"),
             (6.0, 2, "cell judged", "big"), (6.2, 2, "cell done", "big")]  # another student's process: no checks
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"t": t, "pid": pid, "what": what, "key": key}) + "\n"
                             for t, pid, what, key in marks))
    rows = {r["cell"]: r for r in check_phases(trace)}
    assert [r["cell"] for r in check_phases(trace)] == ["big", "small"]
    big = rows["big"]
    assert big["students"] == 2 and abs(big["seconds"] - 2.6) < 1e-9 and abs(big["ask"] - 0.1) < 1e-9
    assert (big["child start"], big["load"], big["run"], big["judge"]) == (0.5, 0.05, 1.0, 0.5)  # means of 2
    assert rows["small"]["run"] == 0

"""The benchmarks' own kernels are right before they are timed (the notebooks' kernels are checked where they are taught)."""
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

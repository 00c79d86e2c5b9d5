"""`course check`'s trial of the memory and race checks: the solution with a guard or a barrier taken out must fail
them, or the check's sizes cannot show what it looks for (a race probe inside one warp went unseen, issue 41)."""
import dataclasses

from course.assignments import Assignment
from course.grading.commands.check import mutants, probe_problems
from course.topics import matmul
from tests.support import ROOT

KERNEL = '''
__global__ void k(float* x, float* out, int n) {
    __shared__ float t[64];
    int i = blockIdx.x*blockDim.x + threadIdx.x;
    if (i >= n) return;
    t[threadIdx.x] = x[i];
    __syncthreads();
    if (threadIdx.x + 1 < blockDim.x && i + 1 < n) out[i] = t[threadIdx.x + 1];
}
'''
WRAPPER = "if (n > 0) k<<<cdiv(n, 64), 64>>>(x, out, n);\nif x < y:\n    pass\n"


def test_each_guard_and_barrier_is_taken_out_once_and_nothing_else():
    races = mutants("race", KERNEL)
    assert [line for line, _ in races] == [7]
    assert "__syncthreads" not in races[0][1] and races[0][1].count("\n") == KERNEL.count("\n")
    guards = mutants("memory", KERNEL + WRAPPER)
    assert [line for line, _ in guards] == [5, 8]  # the host's `if (n > 0)` and Python's `if x < y:` are no guards
    assert "if (false) return;" in guards[0][1]
    assert "if (true) out[i]" in guards[1][1]


def test_a_race_probe_too_small_to_show_a_missing_barrier_is_a_problem_naming_a_size_that_would(monkeypatch):
    assignment = Assignment("matmul", ROOT)
    assert probe_problems(assignment, progress=lambda line: None, only={"matmul_tiled_cuda"}) == []
    # a 1x1 product: one thread of one tile, whatever the barriers
    monkeypatch.setattr(matmul, "MATMUL_TILED", dataclasses.replace(matmul.MATMUL_TILED, probe="tiny"))
    problems = probe_problems(assignment, progress=lambda line: None, only={"matmul_tiled_cuda"})
    race = [p for p in problems if "_race:" in p]
    assert len(race) == 2, problems  # the barrier after loading the tiles, and the one before the next load
    for line in race:
        assert "cannot show a missing __syncthreads()" in line and "passes it on the tiny sizes" in line, line
        assert "sizes would catch it (probe=" in line, line

"""The Python runners call a kernel once per thread, and make index mistakes loud."""
import pytest
import torch

from course import blk_kernel, blk_kernel2d, dim3, run_kernel


def test_run_kernel_calls_every_index_once():
    seen = []
    run_kernel(lambda i, out: seen.append(i), 5, None)
    assert seen == [0, 1, 2, 3, 4]


def test_run_kernel_writes_through_to_the_tensor():
    out = torch.zeros(4, dtype=torch.int64)

    def k(i, out):
        out[i] = i * 10

    run_kernel(k, 4, out)
    assert out.tolist() == [0, 10, 20, 30]


def test_blk_kernel_passes_block_thread_and_blockdim():
    seen = []
    blk_kernel(lambda b, t, d: seen.append((b, t, d)), 2, 3)
    assert seen == [(0, 0, 3), (0, 1, 3), (0, 2, 3), (1, 0, 3), (1, 1, 3), (1, 2, 3)]


def test_blk_kernel2d_covers_the_grid_with_dim3():
    seen = []
    blk_kernel2d(lambda b, t, d: seen.append((b.x, b.y, t.x, t.y, d)), dim3(2, 3), dim3(4, 2))
    assert len(seen) == 2 * 3 * 4 * 2
    assert len(set(seen)) == len(seen)
    assert all(d == dim3(4, 2, 1) for *_, d in seen)
    assert {(bx * 4 + tx, by * 2 + ty) for bx, by, tx, ty, _ in seen} == {(x, y) for x in range(8) for y in range(6)}


def test_dim3_defaults_y_and_z_to_one():
    assert dim3(16) == (16, 1, 1)
    assert dim3(16, 16).y == 16


def test_index_past_the_end_raises_indexerror_naming_block_and_thread():
    def no_guard(blockidx, threadidx, blockdim, out, n):
        i = blockidx * blockdim + threadidx
        out[i] = 1

    with pytest.raises(IndexError, match=r"(?s)index 10 .*block 2, thread 2"):
        blk_kernel(no_guard, 3, 4, torch.zeros(10), 10)


def test_an_index_past_the_end_gets_the_hint_its_kernel_supports():
    def loose(blockidx, threadidx, blockdim, out, n):
        i = blockidx * blockdim + threadidx
        if i <= n:
            out[i] = 1

    def guarded(blockidx, threadidx, blockdim, out, n):
        i = blockidx * blockdim + threadidx
        if i < n:
            out[i + n] = 1

    with pytest.raises(IndexError, match=r"your guard lets i == n through: use `if i < n:`"):
        blk_kernel(loose, 3, 4, torch.zeros(10), 10)
    with pytest.raises(IndexError) as info:
        blk_kernel(guarded, 3, 4, torch.zeros(10), 10)
    assert "guard `i < n` holds for this thread" in str(info.value) and "did you forget" not in str(info.value)


def test_the_runners_note_what_they_ran_for_the_checks_hints():
    from course.ladder import recording
    with recording() as ran:
        blk_kernel(lambda b, t, d: b, 2, 3)
        run_kernel(lambda i: None, 4)
    assert ran["threads"] == 10 and ran["returned"] == 6  # every blk thread returned a value (0 too), none of run_kernel's
    assert ran["launches"] == [("blk_kernel", 2, 3, 6), ("run_kernel", 4, 4)]


def test_negative_index_raises_instead_of_wrapping():
    def k(i, x, out):
        out[i] = x[i - 1]

    out = torch.zeros(3)
    with pytest.raises(IndexError, match="index -1"):
        run_kernel(k, 3, torch.arange(3.0), out)
    assert out.tolist() == [0, 0, 0]


def test_negative_index_raises_in_2d():
    def k(b, t, d, m):
        m[b.y - 1, t.x] = 1

    with pytest.raises(IndexError, match="dimension 0"):
        blk_kernel2d(k, dim3(1, 1), dim3(2, 1), torch.zeros(2, 2))


def test_error_keeps_its_type():
    def k(i):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="thread i=0"):
        run_kernel(k, 1)


def test_error_without_a_message_constructor_still_propagates():
    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(a, b)

    def k(i):
        raise Odd(1, 2)

    with pytest.raises(Odd) as info:
        run_kernel(k, 1)
    assert "thread i=0" in " ".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("bad", [1.5, "4", None, True])
def test_times_must_be_an_int(bad):
    with pytest.raises(TypeError, match="whole number"):
        run_kernel(lambda i: None, bad)


def test_threads_per_block_limited_to_1024():
    with pytest.raises(ValueError, match="at most 1024"):
        blk_kernel(lambda b, t, d: None, 1, 1025)
    with pytest.raises(ValueError, match="at most 1024"):
        blk_kernel2d(lambda b, t, d: None, dim3(1), dim3(64, 32))


def test_negative_blocks_rejected():
    with pytest.raises(ValueError, match="negative"):
        blk_kernel(lambda b, t, d: None, -1, 32)


def test_checked_tensor_reads_like_the_tensor():
    seen = []

    def k(i, x):
        seen.append((x[i].item(), x.shape[0], len(x), x.dtype))

    run_kernel(k, 2, torch.tensor([5, 6], dtype=torch.uint8))
    assert seen == [(5, 2, 2, torch.uint8), (6, 2, 2, torch.uint8)]

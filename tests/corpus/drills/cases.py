"""The drills' grading corpus: known-wrong and known-right answers, and the verdicts each must get.

Each case is a folder `<name>/<exercise>.py` holding the whole solution cell a student left for that exercise.
`fails` names every test the answer must fail, with a phrase its failure message must contain; every test not
named must pass. What the tests feed an answer:
  drill 1 (course/topics/rounding.py): the rungs on the 317 rounding-edge colours; the exact CUDA rung on 1x1,
    7x37 + 1x257 + 33x31, the edge colours, the photo (600x512), 2000x3000, three hidden random sizes, memory and
    integrity on the ragged sizes. Of these, nvcc's fused multiply-adds change 27 edge colours, 13 pixels of the
    2000x3000 image and 2 of the hidden ones; double arithmetic 302, the photo's 4, 122 and 10.
  drill 2 (rows.py): Python rungs on "shapes" (3x5, 7x37, 1x1, 3x300, 0x5) and "negative" (4x9, 5x1, all values
    negative); CUDA on 37x53 + 1x257 + 100x1 + 1000x3, negative 33x31 + 1x7, long rows 5x3000 + 2x100000, no rows
    0x7 + 0x1 + 2x3, hidden random shapes (every other one negative), memory and integrity on the ragged shapes.
  drill 3 (guard.py): whole blocks 16x32 + 1x256 (right pixels), ragged 7x37 + 33x31 + 1x1 (IndexError past n).
  drill 4 (threads.py, timer.py): every block size 32..1024 on 1x1, 7x37 + 33x31 + 1x2049, the photo, hidden
    sizes, memory, integrity; the timer on 20 ms of launch-like work and on a 600 ms first call.
  drill 5: matmul's checks (digits, ragged, large: 1024^3, 512^3 in CPU mode, memory).
  drill 6 (blocking.py): the script in two fresh processes, CUDA_LAUNCH_BLOCKING=0 and =1.
  drill 7 (printf.py): the printed lines for the photo and a 1x3 image; the pixels on the ragged sizes.
  drill 8 (plan.py): the student's own examples.
  drill 9 (mechanical.py): c_int on edge values and large images' indices; c_div and c_mod on 13 pairs, negative
    ones among them; grey_double on the edge colours and the photo; the histogram on 1 + 259 + 1,000 values, the
    photo's red values, 2**20 copies of 42, memory on the small sizes (in CPU mode a kernel without an atomic
    operation fails: no count is lost there); smooth on 1, 2, 3, 5 values, 257 + 1,000 + 4,097, memory.
Where a GPU and CPU mode give different verdicts (g++ does not fuse multiply-adds; a CPU-mode launch runs its
kernel before it returns), `gpu` and `cpu` give each mode's.
"""
from tests.corpus.answers import ANY, Case, every, tests_of

EXACT = tests_of("drills", "drill1_exact_cuda")
ROWS = tests_of("drills", "drill2_row_sum_cuda")
THREADS = tests_of("drills", "drill4_threads_cuda")

FMA = "fused multiply-adds"
WRONG = "are wrong"
NEVER = "never written"


CASES = {
    # ---- drill 1: the exact CUDA rung ------------------------------------------------------------------------
    "d1_plain_sum": Case(
        "drill1_exact_cuda", "the lessons' plain sum: right in CPU mode, where g++ does not fuse; on a GPU nvcc's FMAs change"
        " 27 edge colours, 13 pixels of 2000x3000 and 2 of the hidden sizes",
        gpu={"edges": FMA, "large": FMA, "hidden_sizes": FMA}, cpu={}),
    "d1_fmaf": Case(
        "drill1_exact_cuda", "__fmaf_rn in nvcc's order, 'one rounding is more exact': the GPU's FMA bytes in both modes",
        {"edges": FMA, "large": FMA, "hidden_sizes": FMA}),
    "d1_double_constants": Case(
        "drill1_exact_cuda", "constants without their f: the sum in double, 302 edge colours and 4 of the photo's pixels"
        " in CPU mode; on the H200 nvcc fuses the double sum into multiply-adds: 202 edge colours, none of the photo's",
        {"edges": "double arithmetic", "photo": "double arithmetic", "large": "double arithmetic",
         "hidden_sizes": "double arithmetic"},
        gpu={"edges": "double arithmetic", "large": "double arithmetic", "hidden_sizes": "double arithmetic"}),
    "d1_other_order": Case(
        "drill1_exact_cuda", "__fadd_rn(r, __fadd_rn(g, b)): the intrinsics, but the products added in another order",
        {"edges": "another order", "large": "another order", "hidden_sizes": "another order"}),
    "d1_right_named_terms": Case(
        "drill1_exact_cuda", "right: each product in a variable with __fmul_rn, two __fadd_rn, explicit casts"),

    # ---- drill 1: the Python rungs ---------------------------------------------------------------------------
    "d1_rungs_l0_python_floats": Case(
        "drill1_rungs", "L0 converts each value with float(): Python floats, so the sum is in double",
        {"py_edges": "double arithmetic"}),
    "d1_rungs_l2_other_order": Case(
        "drill1_rungs", "L2 adds green and blue first: 0.2989*r + (0.5870*g + 0.1140*b)",
        {"pybk_edges": "another order"}),
    "d1_rungs_right_float_tensors": Case(
        "drill1_rungs", "right: L0 takes each value as a float32 tensor (x[i].float()) before the sum"),

    # ---- drill 2: Python rungs -------------------------------------------------------------------------------
    "d2_py_max_from_zero": Case(
        "drill2_rows_py", "row_max_py starts from 0: every row whose values are all negative gets 0",
        {"max_shapes": "starts at 0", "max_negative": "starts at 0"}),
    "d2_py_right_builtins": Case(
        "drill2_rows_py", "right: Python's sum() and max() over a generator along the row"),
    "d2_k_sum_stops_short": Case(
        "drill2_rows_k", "row_sum_k loops j over range(w - 1): every row misses its last value",
        {"sum_shapes": "misses its last value", "sum_negative": "misses its last value"}),
    "d2_bk_no_guard": Case(
        "drill2_rows_bk", "no `if i < h`: the threads past the last row index past the matrix",
        {"sum_shapes": "IndexError", "sum_negative": "IndexError", "max_shapes": "IndexError",
         "max_negative": "IndexError"}),
    "d2_bk_right_early_return": Case(
        "drill2_rows_bk", "right: row_sum_bk returns early past the last row and sums with sum()"),

    # ---- drill 2: CUDA ---------------------------------------------------------------------------------------
    "d2_sum_launch_without_if": Case(
        "drill2_row_sum_cuda", "launches without `if (h > 0)`: a matrix with no rows asks for 0 blocks",
        {"no_rows": "impossible grid"}),
    "d2_sum_int_accumulator": Case(
        "drill2_row_sum_cuda", "`int s = 0`: each value is truncated as it is added",
        every(ROWS, WRONG)),
    "d2_sum_right_double": Case("drill2_row_sum_cuda", "right: the running sum kept in double"),
    "d2_max_from_zero": Case(
        "drill2_row_max_cuda", "`float m = 0.0f`: rows of negative values get 0 (the ragged shapes have some: 100x1)",
        every(ROWS, "starts at 0", but=("long_rows", "no_rows"))),
    "d2_max_int_variable": Case(
        "drill2_row_max_cuda", "`int m = x[i*w]`: the max kept in an int, each value truncated toward zero",
        every(ROWS, "kept in an int")),
    "d2_max_column_read": Case(
        "drill2_row_max_cuda", "reads x[j*h + i]: the matrix as if stored column by column",
        every(ROWS, "column by column", but=("no_rows",), memory=WRONG)),
    "d2_max_right_minus_infinity": Case(
        "drill2_row_max_cuda", "right: starts from -INFINITY and walks a pointer to the row"),

    # ---- drill 3 ---------------------------------------------------------------------------------------------
    "d3_guard_kept": Case(
        "drill3_no_guard", "the lesson's kernel with its guard: right everywhere, so no IndexError past the end",
        {"ragged": "raised no IndexError"}),
    "d3_thread_index_only": Case(
        "drill3_no_guard", "i = threadidx: every block writes the first 256 pixels, so nothing past the end is reached",
        {"whole_blocks": NEVER, "ragged": "raised no IndexError"}),
    "d3_right_negative_test_free": Case(
        "drill3_no_guard", "right: the channels read into r, g, b first, the index written threadidx + blockidx*blockdim"),

    # ---- drill 4 ---------------------------------------------------------------------------------------------
    "d4_blocks_for_256": Case(
        "drill4_threads_cuda", "cdiv(n, 256) blocks whatever the block size: too few blocks below 256 threads",
        every(THREADS, NEVER, but=("tiny",), memory=WRONG, integrity=WRONG)),
    "d4_blocks_floor": Case(
        "drill4_threads_cuda", "n / threads blocks: rounds down, 0 blocks for the 1x1 image; the photo's 307,200 pixels"
        " fill whole blocks at every size", every(THREADS, "impossible grid", but=("photo",), hidden_sizes=NEVER)),
    "d4_index_times_256": Case(
        "drill4_threads_cuda", "i = blockIdx.x*256 + threadIdx.x: right at 256 only",
        every(THREADS, WRONG, but=("tiny",))),
    "d4_right_grid_stride": Case(
        "drill4_threads_cuda", "right: a grid-stride loop on at most 64 blocks of the given size"),
    "d4_timer_no_sync": Case(
        "drill4_timer", "reads the clock around the call without synchronize(): it times the launch",
        {"waits": "stopped the clock before the work was done"}),
    "d4_timer_seconds": Case(
        "drill4_timer", "times in seconds, not milliseconds", {"waits": "in seconds", "warmup": "in seconds"}),
    "d4_timer_mean_no_warmup": Case(
        "drill4_timer", "no warm-up and the mean of the repeats: the 600 ms first call pulls the answer up",
        {"warmup": "warm-up"}),
    "d4_timer_right_total_over_reps": Case(
        "drill4_timer", "right: one synchronize() around all the repeats, the total divided by their number"),

    # ---- drill 5 ---------------------------------------------------------------------------------------------
    "d5_grid_swapped": Case(
        "drill5_matmul_cuda", "blocks(cdiv(h, 16), cdiv(w, 16)): right on the digits (one block) and square products",
        {"ragged_sizes": NEVER, "memory": WRONG}),
    "d5_right_lecture_zeros": Case(
        "drill5_matmul_cuda", "right: the lecture's kernel, if (r < h && c < w) and torch::zeros for the output"),

    # ---- drill 6 ---------------------------------------------------------------------------------------------
    "d6_nothing_after_launch": Case(
        "drill6_script", "ends right after the launch: on a GPU with CUDA_LAUNCH_BLOCKING=0 nothing waits for the kernel,"
        " so no error is raised; in CPU mode every launch raises at once",
        gpu={"blocking": "nothing after the launch waited"}, cpu={}),
    "d6_catches_the_error": Case(
        "drill6_script", "wraps the launch in try/except RuntimeError: both runs end without an error",
        {"blocking": "ran to the end without an error"}),
    "d6_near_kernel": Case(
        "drill6_script", "builds near_src, which the child does not have: a NameError, not the far kernel's fault",
        {"blocking": "not with the far kernel's memory fault"}),
    "d6_right_synchronize": Case(
        "drill6_script", "right: synchronize() as the operation after the launch"),

    # ---- drill 7 ---------------------------------------------------------------------------------------------
    "d7_le_five": Case(
        "drill7_printf_cuda", "`if (i <= 5)`: six lines for the photo", {"photo": "i = 5 through"}),
    "d7_printf_outside_guard": Case(
        "drill7_printf_cuda", "printf outside `if (i < n)`: the 1x3 image prints lines for pixels 3 and 4, read past"
        " the output", {"small": "threads past the last pixel printed"}),
    "d7_prints_red": Case(
        "drill7_printf_cuda", "prints x[i], the red value, not the grey value", {"photo": "red value", "small": "red value"}),
    "d7_float_format": Case(
        "drill7_printf_cuda", "prints the float sum with %f: not the stored, truncated grey value",
        {"photo": "a whole number", "small": "a whole number"}),
    "d7_right_thread_zero_block": Case(
        "drill7_printf_cuda", "right: the first block's threads 0-4 print `i = %d, grey = %u` from out[i]"),

    # ---- drill 8 ---------------------------------------------------------------------------------------------
    "d8_one_example": Case(
        "drill8_l0", "one example only", {"examples": "at least two"}),
    "d8_loop_misses_last": Case(
        "drill8_l0", "the histogram's loop stops one value short: its counts and bincount's differ",
        {"examples": "differ on"}),
    "d8_right_softmax": Case("drill8_l0", "right: a row-wise softmax against torch.softmax, three examples"),

    # ---- drill 9 ---------------------------------------------------------------------------------------------
    "d9_c_int_python_int": Case(
        "drill9_c_int", "returns v: Python's int, which never wraps", {"values": "a C int holds", "indices": "a C int holds"}),
    "d9_c_int_clamps": Case(
        "drill9_c_int", "clamps to INT_MIN..INT_MAX: saturation, which C's int does not do",
        {"values": "wraps around", "indices": "wraps around"}),
    "d9_c_int_right_bit_mask": Case("drill9_c_int", "right: the low 32 bits, minus 2**32 when the sign bit is set"),
    "d9_division_python_operators": Case(
        "drill9_c_division", "Python's // and %: right only where a and b have the same sign",
        {"div": "Python's answer", "mod": "Python's answer"}),
    "d9_division_right_int_of_float": Case(
        "drill9_c_division", "right: int(a / b), which truncates, and math.fmod, which keeps a's sign"),
    "d9_double_float32": Case(
        "drill9_grey_double", "computes in float32 (x.float()): the lessons' bytes, not C's double ones",
        {"edges": "float32 reference's", "photo": "float32 reference's"}),
    "d9_double_right_float64_tensors": Case(
        "drill9_grey_double", "right: the planes as float64 rows, reshaped back"),
    "d9_hist_plus_equals": Case(
        "drill9_histogram_cuda", "counts[x[i]] += 1, to_cuda's text: a race on a GPU; CPU mode loses nothing, so the "
        "check asks for an atomic there", cpu=every(("small", "photo", "one_value", "memory"), "without an atomic"),
        gpu={"small": ANY, "photo": "were lost", "one_value": "were lost", "memory": ANY}),
    "d9_hist_counts_uninitialised": Case(
        "drill9_histogram_cuda", "torch::empty for the counts: atomicAdd adds to whatever the memory held",
        cpu=every(("small", "photo", "one_value", "memory"), "are wrong"),
        gpu={"small": "are wrong", "photo": "are wrong", "one_value": "are wrong", "memory": ANY}),
    "d9_hist_right_shared_per_block": Case(
        "drill9_histogram_cuda", "right: a block's counts in shared memory, added to the global ones once per block"),
    "d9_smooth_chained_guard": Case(
        "drill9_smooth_cuda", "`if (0 < i < n - 1)`, Python's guard copied: true for every thread but 0 once n > 2, "
        "so the ends read x[-1] and x[n] and the threads past the end write past the output",
        {"small": "are wrong", "ragged": "are wrong", "memory": "out-of-bounds"}),
    "d9_smooth_ends_unwritten": Case(
        "drill9_smooth_cuda", "the mean only, no else: the first and last values are never written",
        every(("small", "ragged", "memory"), "are wrong")),
    "d9_smooth_right_early_returns": Case(
        "drill9_smooth_cuda", "right: returns past the end and at the ends, the neighbours in named floats"),
}

"""The matmul grading corpus: known-wrong and known-right answers, and the verdicts each must get.

Each case is a folder `<name>/<exercise>.py` holding the whole solution cell a student left for that
exercise. `fails` names every test the answer must fail, with a phrase its failure message must contain;
every test not named must pass. What the tests feed an answer (course/topics/matmul.py, (m, k, n) for an
(m, k) @ (k, n) product):
  Python rungs: tiny 1x1x1; ragged_sizes (3,5,7), (17,37,19); tall_and_skinny (37,2,1), (1,2,37), (1,60,1);
    all_different (6,11,4); digits (5,784,10); hidden_sizes two random shapes, sides 1..24.
  CUDA rung: tiny; ragged_sizes (37,53,29), (17,1,31), (100,67,83); tall_and_skinny (1000,3,2), (2,3000,5),
    (1,2048,1); all_different (45,70,23); digits; large (1024,1024,1024; 512 in CPU mode); hidden_sizes three random shapes,
    sides 1..300; memory, race and integrity on the ragged sizes (race: the first one only).
  Triton rung: the CUDA rung's sizes, but large is 128x128x128 in CPU mode (the interpreter) and the hidden sides
    are 1..160; memory and integrity on the ragged sizes. In CPU mode tl.dot computes float32 whatever its
    input_precision, so a TF32 answer is failed from its source there (and from its values on a GPU). On a GPU the
    memory check runs under compute-sanitizer on fresh allocations, with no fill to show an element never written.
Every test, memory and integrity included, also judges the product, so an answer that is wrong on the
ragged sizes fails memory and integrity too. A race's verdicts depend on how the threads happen to run:
`gpu` and `cpu` give a case's verdicts where the two differ (see the case's `what`).
"""
from tests.corpus.answers import ANY, Case, every, tests_of

PY_TESTS = tests_of("matmul", "matmul")
CUDA_TESTS = tests_of("matmul", "matmul_cuda")
TILED_TESTS = tests_of("matmul", "matmul_tiled_cuda")
TRITON_TESTS = tests_of("matmul", "matmul_triton")

WRONG = "elements are wrong"
NEVER = "never written"


def py(phrase, but=(), **special):
    return every(PY_TESTS, phrase, but, **special)


def cu(phrase, but=(), **special):
    return every(CUDA_TESTS, phrase, but, **special)


def ti(phrase, but=(), **special):
    return every(TILED_TESTS, phrase, but, **special)


def tr(phrase, but=(), **special):
    return every(TRITON_TESTS, phrase, but, **special)


OOB = "out-of-bounds"
OUTSIDE = "access outside a tensor"  # the Triton memory check's words, in CPU mode and on a GPU

CASES = {
    # ---- L3, CUDA: known wrong -----------------------------------------------------------------------
    "cuda_loop_stops_one_short": Case(
        "matmul_cuda", "`i < k - 1`: every element misses its last product; the digits pass, their last pixel is blank in every digit",
        cu(WRONG, but=("digits",))),
    "cuda_loop_starts_at_one": Case(
        "matmul_cuda", "`int i = 1`: every element misses its first product; the digits pass, their first pixel is blank",
        cu(WRONG, but=("digits",))),
    "cuda_grid_x_y_swapped": Case(
        "matmul_cuda", "blocks(cdiv(h, 16), cdiv(w, 16)): x and y swapped, so rows past 16*cdiv(w, 16) are never written;"
        " right where h and w need as many blocks (1x1, the digits, 1024x1024)",
        cu(NEVER, but=("tiny", "digits", "large"), memory=WRONG)),
    "cuda_transposed_store": Case(
        "matmul_cuda", "writes out[c*h + r]: the right values stored column by column; only the 1x1 product survives",
        cu("stored column by column", but=("tiny",))),
    "cuda_int_accumulator": Case(
        "matmul_cuda", "`int o = 0`: each product is added and the sum truncated to a whole number", cu(WRONG)),
    "cuda_prefetch_reads_one_past": Case(
        "matmul_cuda", "loads the next a[r*k + i + 1] ahead of its turn: the values are right, the last read of the last row is"
        " one float past a; on the H200 the memory check passes it, rightly: the value is never used, and nvcc's code"
        " (nvcc -O3 -ptx for sm_90) loads m[r*k + i] in its turn and never the one past", {"memory": OOB}, gpu={}),
    "cuda_a_read_column_major": Case(
        "matmul_cuda", "reads a[i*h + r]: a as if stored column by column", cu("read m column by column", but=("tiny",))),
    "cuda_b_read_row_major": Case(
        "matmul_cuda", "reads b[c*k + i]: b as if stored column by column", cu("read n column by column", but=("tiny",))),
    "cuda_double_output_float_pointer": Case(
        "matmul_cuda", "output allocated as float64 and written through data_ptr<float>(): PyTorch refuses the pointer",
        cu("raised an error")),
    "cuda_output_shape_w_h": Case(
        "matmul_cuda", "output allocated as {w, h}: right values, the wrong shape except for square products",
        cu("returned shape", but=("tiny", "large"))),
    "cuda_wrapper_uses_torch_matmul": Case(
        "matmul_cuda", "launches nothing: the wrapper fills the output with m.mm(n), PyTorch's (cuBLAS's) product",
        {"integrity": "PyTorch operation"}),
    "cuda_64x64_threads": Case(
        "matmul_cuda", "dim3 tpb(64, 64): 4,096 threads a block, more than CUDA allows: every launch fails",
        cu("impossible grid")),
    "cuda_writes_into_input": Case(
        "matmul_cuda", "zeroes m[r*k] after computing its element: right values, changed input (not on the digits: the "
        "first pixel of every digit is already 0)", cu("changed its input", but=("digits",))),
    "cuda_loop_never_advances": Case(
        "matmul_cuda", "`for (int i = 0; i < k; i + 1)`: i never changes, every thread loops forever", cu("did not finish")),

    # ---- L3, CUDA: known right -----------------------------------------------------------------------
    "cuda_right_lecture_3": Case("matmul_cuda", "right: lecture 3's kernel as it is (torch::zeros for the output)"),
    "cuda_right_block_32": Case("matmul_cuda", "right: 32x32 threads a block"),
    "cuda_right_1d_grid": Case("matmul_cuda", "right: a 1D grid, one thread per element, (r, c) from t / w and t % w"),
    "cuda_right_grid_stride": Case("matmul_cuda", "right: a grid-stride loop over the elements on a fixed grid of 64 blocks of 128"),
    "cuda_right_double_sum": Case("matmul_cuda", "right: the sum kept in double"),
    "cuda_right_fmaf_restrict": Case("matmul_cuda", "right: const __restrict__ pointers, fmaf, #pragma unroll 4, no early return"),
    "cuda_right_reverse_sum": Case("matmul_cuda", "right: sums from i = k - 1 down to 0"),

    # ---- going further, CUDA tiled: known wrong ----------------------------------------------------------
    "tiled_missing_second_sync": Case(
        "matmul_tiled_cuda", "no __syncthreads() after the products: a thread overwrites the tile others still read. In CPU mode a"
        " block's threads run one at a time between barriers, so every product of more than one tile is wrong; on a GPU the"
        " threads run together and the damage shows at 1024 (measured), while racecheck sees the hazard on any size",
        gpu={"large": WRONG, "race": "race"},
        cpu=ti(WRONG, but=("tiny",), race="race", integrity="race")),
    "tiled_phases_floor": Case(
        "matmul_tiled_cuda", "`ph < k / tw`: the last, partial tile is dropped; the digits (784 = 49 x 16) and 1024 pass",
        ti(WRONG, but=("digits", "large"))),
    "tiled_naive_kernel_renamed": Case(
        "matmul_tiled_cuda", "the naive L3 kernel handed in as matmul_static: right values, no shared memory",
        {"integrity": "did not use shared memory"}),
    "tiled_b_tile_transposed": Case(
        "matmul_tiled_cuda", "fills n's tile with n[(idx + tc)*w + c]: wrong values, and reads past n at the ragged edges"
        " (so in CPU mode the race and integrity checks' two runs may read different garbage there: they fail either"
        " way, as wrong or as two different answers)",
        ti(WRONG, but=("tiny",), memory=OOB, race="", integrity="")),

    # ---- going further, CUDA tiled: known right ----------------------------------------------------------
    "tiled_right_lecture_5_static": Case("matmul_tiled_cuda", "right: lecture 5's matmul_static as it is"),
    "tiled_right_lecture_5_dynamic": Case("matmul_tiled_cuda", "right: lecture 5's matmul_dyn as it is (extern __shared__, cdiv in the kernel)"),
    "tiled_right_lecture_5_template": Case("matmul_tiled_cuda", "right: lecture 5's matmul_dyn1 as it is (a template launched through a lambda)"),
    "tiled_right_tile_32": Case("matmul_tiled_cuda", "right: the static kernel with 32x32 tiles (1,024 threads a block)"),

    # ---- going further, Triton: known wrong (GPU verdicts measured on the H200, Triton 3.6; "" = any failure) -------
    "tri_no_mask": Case(
        "matmul_triton", "no mask on the tile loads or the store: the edge lanes read and write past the matrices; only"
        " 128x128 (CPU mode) and 1024x1024, multiples of the 32-wide tiles, stay inside. In CPU mode the reads past a"
        " tensor find NaN; on a GPU they find whatever lies there, or fault",
        cpu=tr(WRONG, but=("large",), memory=OUTSIDE), gpu=tr("", but=("large",), memory=OUTSIDE, tiny=ANY)),
    "tri_n_mask_misses_k": Case(
        "matmul_triton", "n's tile masked on its columns only, not on ks < k: the last, partial tile reads rows of n past"
        " its end; where m's masked zeros meet what lies there the product stays right unless that is NaN or inf, so"
        " on a GPU the small products may pass", cpu=tr(WRONG, but=("large",), memory=OUTSIDE),
        gpu=tr("", but=("large",), memory=OUTSIDE, tiny=ANY, tall_and_skinny=ANY)),
    "tri_store_unmasked": Case(
        "matmul_triton", "loads masked, the store not: a tile's lanes past the last column land on the next row's first"
        " elements (zeros, since the masked loads gave 0.0), over what another program wrote there, whenever w needs"
        " more than one tile; past the last row they write outside out. In CPU mode the programs run in order; on a"
        " GPU which write lands last varies",
        cpu={"ragged_sizes": WRONG, "hidden_sizes": WRONG, "memory": OUTSIDE, "integrity": WRONG},
        gpu={"ragged_sizes": "", "hidden_sizes": "", "memory": OUTSIDE, "integrity": "", "tall_and_skinny": ANY,
             "all_different": ANY, "digits": ANY}),
    "tri_last_tile_shifted_back": Case(
        "matmul_triton", "the last tile moved back to end at the last row and column (tl.minimum(pid*BM, h - BM)), so"
        " rows and columns go unmasked and the store skips negative ones: inside the matrices wherever h and w are at"
        " least a tile (4), before them where a side is smaller, i.e. only on the memory check's 1x1, one-row and"
        " one-column products; every value is right", {"memory": OUTSIDE}),
    "tri_loads_without_other": Case(
        "matmul_triton", "masked tile loads without other=: the masked lanes' values are undefined (Triton's docs); the"
        " interpreter gives 0, so the values are right in CPU mode, and the memory check fails it from the source",
        {"memory": "has a mask but no other="}),
    "tri_n_strides_swapped": Case(
        "matmul_triton", "n's strides passed in the wrong order (n.stride(1), n.stride(0)): element (i, c) read at"
        " i + c*w, wrong values everywhere but 1x1, and past n's end wherever w > k",
        cpu=tr(WRONG, but=("tiny",), memory=OUTSIDE), gpu=tr("", but=("tiny",), memory=OUTSIDE)),
    "tri_program_ids_swapped": Case(
        "matmul_triton", "pid_r from tl.program_id(0), pid_c from (1) on a (columns, rows) grid: right where h and w need"
        " as many tiles (1x1, the digits, the square large product), rows or columns never written elsewhere",
        tr(NEVER, but=("tiny", "digits", "large"), memory=WRONG)),
    "tri_tf32_left_on": Case(
        "matmul_triton", "tl.dot(a, b) with input_precision left at its default, TF32: on a GPU every product is outside"
        " the float32 bound; in CPU mode the interpreter computes float32 anyway and the check fails it from the source",
        tr('input_precision="ieee"')),
    "tri_float16_accumulator": Case(
        "matmul_triton", "acc = tl.zeros(..., dtype=tl.float16), each tile's tl.dot rounded to float16 as it is added",
        tr(WRONG)),
    "tri_torch_beside_a_dummy_kernel": Case(
        "matmul_triton", "launches the kernel on an empty problem and returns m @ n: right values, PyTorch's product",
        {"integrity": "PyTorch operation"}),
    "tri_k_loop_one_tile_short": Case(
        "matmul_triton", "`range(0, k - BK, BK)`: the last tile of k is never added; the digits pass, their last 16 pixels"
        " are blank in every digit", tr(WRONG, but=("digits",))),
    "tri_global_not_constexpr": Case(
        "matmul_triton", "the grouped order with GROUP = 4 a plain global read in the kernel: the interpreter runs it,"
        " Triton's compiler refuses it (not a tl.constexpr), and CPU mode compiles every kernel as the GPU does",
        tr("may read a global only if it is a tl.constexpr")),
    "tri_grid_one_row_of_tiles": Case(
        "matmul_triton", "grid = (cdiv(w, BN),): one row of tiles, so rows past 32 are never written; right where h <= 32",
        tr(NEVER, but=("tiny", "digits"), memory=WRONG)),

    # ---- going further, Triton: known right --------------------------------------------------------------------
    "tri_right_tiles_16": Case("matmul_triton", "right: 16x16x16 tiles, the smallest k side the grading host's tl.dot takes"),
    "tri_right_non_square_tiles": Case("matmul_triton", "right: 64x32 tiles of out, k in steps of 16, ieee precision"),
    "tri_right_grouped_order": Case(
        "matmul_triton", "right: a 1D grid in grouped order (GROUP tile rows walked down before moving right, so programs"
        " running together share tiles of n), as Triton's tutorial orders it, GROUP = tl.constexpr(4)"),
    "tri_right_1d_grid": Case("matmul_triton", "right: a 1D grid, the tile row and column from pid // and % the tiles across"),
    "tri_right_broadcast_sum": Case(
        "matmul_triton", "right in CPU mode: no tl.dot, the products broadcast to (BM, BK, BN) and summed over k with"
        " tl.sum. Triton 3.6's compiler (the H200 host's) turns that sum into a tl.dot at TF32 (tensor cores, mma"
        " .tf32), so on the GPU every test fails as TF32 (3.8's makes it an ieee one)", gpu=tr("TF32")),

    # ---- Python rungs: known wrong -----------------------------------------------------------------------
    "py_assigns_instead_of_adding": Case(
        "matmul", "`c[i, j] = a[i, k] * b[k, j]`: each step replaces the sum, only the last product is left",
        py(WRONG, but=("tiny",))),
    "py_output_is_h_by_h": Case(
        "matmul", "c = torch.zeros(ar, ar): IndexError where b is wider than a is tall, the wrong shape elsewhere",
        py("IndexError", but=("tiny",), tall_and_skinny="returned shape", all_different="returned shape",
           hidden_sizes="returned shape")),
    "py_k_writes_c_j_i": Case(
        "matmul_k", "writes c[j, i]: IndexError on every product that is not square", py("IndexError", but=("tiny",))),
    "py_bk_no_guard": Case(
        "matmul_bk", "no `if r < h and c < w` guard: the threads past the edge index past the tensors", py("IndexError")),
    "py_bk_row_stride_h": Case(
        "matmul_bk", "writes out[r*h + c]: rows of h, not w, elements apart", 
        py(WRONG, but=("tiny",), tall_and_skinny="IndexError", all_different="IndexError")),
    "py_tiled_missing_second_sync": Case(
        "matmul_tiled_bk", "no syncthreads() after the products: wrong wherever k needs more than one tile (the 1x60 dot product"
        " has one output, whose thread runs before anyone overwrites its tile)",
        {"ragged_sizes": "race on shared memory", "digits": "race on shared memory", "hidden_sizes": "race on shared memory"}),
    "py_tiled_no_shared_memory": Case(
        "matmul_tiled_bk", "computes from m and n directly inside blk_kernel2d_shar: right values, no tile",
        py("without filling shared memory")),

    # ---- Python rungs: known right -----------------------------------------------------------------------
    "py_right_lecture_row_at_a_time": Case("matmul", "right: the lecture's second version, a row at a time with broadcasting"),
    "py_right_k_python_floats": Case("matmul_k", "right: Python floats (float64) summed with sum()"),
    "py_right_bk_32_early_return": Case("matmul_bk", "right: 32x32 threads a block, `return` past the edge, sum() of a generator"),
    "py_right_tiled_tile_8": Case("matmul_tiled_bk", "right: the wrapper's tile width set to 8"),
}

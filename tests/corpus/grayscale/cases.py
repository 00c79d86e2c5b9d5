"""The grading corpus: known-wrong and known-right answers, and the verdicts each must get.

Each case is a folder `<name>/<exercise>.py` holding the whole solution cell a student left for that
exercise (for L1 and L2 the cell holds the kernel and its wrapper). `fails` names every test the answer
must fail, with a phrase its failure message must contain; every test not named must pass.

The tests (what each one feeds the answer is in the grader's brief; the sizes matter below):
  Python rungs (rgb2grey_py, rgb2grey_k -> rgb2grey_pyk, rgb2grey_bk -> rgb2grey_pybk): PY_TESTS.
    tiny 1x1; ragged_sizes 7x37, 1x257, 33x31; tall_and_wide 40x1, 1x40; photo 150x128 (19,200 pixels,
    75 blocks of 256); hidden_sizes several random sizes, h and w in 1..200.
  CUDA rung (rgb_to_grayscale_cuda -> rgb_to_grayscale): CUDA_TESTS.
    tiny 1x1; ragged_sizes 7x37, 1x257, 33x31; tall_and_wide 1000x1, 1x1000, 3x3001; photo 600x512
    (307,200 pixels, 1,200 blocks of 256); large 2000x3000; hidden_sizes random sizes, h and w in 1..700;
    memory (the ragged sizes under compute-sanitizer); integrity (the ragged sizes, run twice, profiled).
  Triton rung (rgb2grey_triton -> rgb2grey_triton): TRITON_TESTS. On a GPU the CUDA rung's sizes but large; in CPU
    mode (Triton's interpreter, a Python call per program) the Python rungs' small ones: tall_and_wide 40x1 and
    1x40, photo 150x128. hidden_sizes: seed 8443. memory: the ragged sizes under compute-sanitizer on a GPU, on
    guarded memory in CPU mode (an access past a tensor's end crashes the check's child, which names the line).
  Every test, memory and integrity included, also checks the input, the returned tensor and its pixels,
  so an answer whose pixels are wrong on the ragged sizes fails memory and integrity too.

Verdicts that rest on the pixel values of the generated images (tiny's 1x1 pixel is r=253, g=234,
b=30: exact grey 216.3997) were computed from the images course.topics.grayscale makes today. "hidden_sizes" verdicts
are for the seeds in the source notebooks (4021, 5113, 6229 for L0-L2; 7351 for L3: 107x383, 183x27, 190x60
and 62x1) and hold for almost any seed; a `what` says where the seed matters.
"""
from tests.corpus.answers import ANY, Case, every, tests_of

PY_TESTS = tests_of("grayscale", "rgb2grey_py")
CUDA_TESTS = tests_of("grayscale", "rgb_to_grayscale_cuda")
TRITON_TESTS = tests_of("grayscale", "rgb2grey_triton")

# The phrases the failure messages carry.
PIXELS = "pixels are wrong"
NEVER = "never written"   # some wrong pixels still hold 171, the byte the output was filled with
SHAPE = "returned shape"
INPUT = "changed its input"
RAISED = "raised"
OOB = "out-of-bounds"
OUTSIDE = "found an access outside a tensor"  # the Triton memory check's words, on a GPU and in CPU mode


def py(phrase, but=(), **special):
    return every(PY_TESTS, phrase, but, **special)


def cu(phrase, but=(), **special):
    return every(CUDA_TESTS, phrase, but, **special)


def tri(phrase, but=(), **special):
    return every(TRITON_TESTS, phrase, but, **special)


CASES = {
    # ---- L0-L2, Python: known wrong ------------------------------------------------------------------
    "py_classic_weights": Case(
        "rgb2grey_py", "the textbook weights 0.3, 0.59, 0.11: off by up to 0.9 grey level, so even the 1x1 pixel (216.40 -> 217.26) is wrong",
        py(PIXELS)),
    "py_rounds": Case(
        "rgb2grey_py", "rounds with .round() instead of truncating; the 1x1 pixel's fraction is 0.40, so tiny passes",
        py(PIXELS, but=("tiny",))),
    "py_transposed": Case(
        "rgb2grey_py", "writes pixel (row, col) to res[col*h + row]: right only for one-row or one-column images (tiny, tall_and_wide, 1x257)",
        py(PIXELS, but=("tiny", "tall_and_wide"))),
    "py_returns_input": Case(
        "rgb2grey_py", "computes res but returns x, the flattened input: shape (3*h*w,)",
        py(SHAPE)),
    "py_changes_input": Case(
        "rgb2grey_py", "computes the grey in place into x's red plane (flatten is a view) and returns x[:n]: right values, changed input",
        py(INPUT)),
    "py_hardcoded_n": Case(
        "rgb2grey_py", "n = 19200 (the small photo's pixel count): IndexError on smaller images, view error on larger ones",
        py(RAISED, but=("photo",))),
    "py_k_writes_next": Case(
        "rgb2grey_k", "writes out[i+1] instead of out[i]: the last thread indexes past the end on every image",
        py("IndexError")),
    "py_k_interleaved": Case(
        "rgb2grey_k", "reads HWC-interleaved x[3*i], x[3*i+1], x[3*i+2] from a CHW image: same as CHW only for 1 pixel",
        py(PIXELS, but=("tiny",))),
    "py_bk_no_guard": Case(
        "rgb2grey_bk", "no `if i < n` guard: IndexError unless h*w is a multiple of 256, which only the photo (19,200) is",
        py("IndexError", but=("photo",))),
    "py_bk_photo_shape": Case(
        "rgb2grey_bk", "returns res.view(150, 128), the small photo's shape: raises for every other size",
        py(RAISED, but=("photo",))),
    "py_bk_while_loop": Case(
        "rgb2grey_bk", "`while i < n:` instead of `if`: i never changes, so the first thread loops forever",
        py("did not finish")),

    # ---- L0-L2, Python: known right ------------------------------------------------------------------
    "py_right_2d_loops": Case(
        "rgb2grey_py", "right: two loops over rows and columns, indexing x[c, row, col] and a (h, w) output"),
    "py_right_k_stderr": Case(
        "rgb2grey_k", "right, and prints progress to sys.stderr from the kernel and the wrapper (must keep full marks)"),
    "py_right_k_python_floats": Case(
        "rgb2grey_k", "right: converts to Python floats (float64) and truncates with int()"),
    "py_right_bk_1024_early_return": Case(
        "rgb2grey_bk", "right: 1024 threads a block, `if i >= n: return`, reshape instead of view"),

    # ---- L3, CUDA: known wrong -----------------------------------------------------------------------
    "cuda_missing_guard": Case(
        "rgb_to_grayscale_cuda", "no `if (i < n)` guard: the idle threads of the last block read and write past the tensors; the pixels are still right",
        {"memory": OOB}),
    "cuda_red_read_volatile": Case(
        "rgb_to_grayscale_cuda", "the red byte read before the guard through a volatile pointer (so no compiler moves it"
        " inside): lane i reads x[i], inside x (3n bytes) wherever the last block ends before 3n, so only the memory"
        " check's 1x1 image reads past x; every pixel is right",
        {"memory": OOB}),
    "cuda_guard_off_by_one": Case(
        "rgb_to_grayscale_cuda", "guard `i <= n`: thread n reads x[3n] and writes out[n], one byte past each (every ragged size has a thread n)",
        {"memory": OOB}),
    "cuda_index_plus_one": Case(
        "rgb_to_grayscale_cuda", "i = blockIdx.x*blockDim.x + threadIdx.x + 1: pixel 0 is never written, every other pixel is right",
        cu(NEVER, memory=PIXELS, integrity=PIXELS)),
    "cuda_red_weight_0299": Case(
        "rgb_to_grayscale_cuda", "red weight 0.299f instead of 0.2989f: tips the few pixels just below an integer; the 1x1 pixel (216.40 -> 216.43) survives",
        cu(PIXELS, but=("tiny",))),
    "cuda_green_blue_swapped": Case(
        "rgb_to_grayscale_cuda", "green and blue weights swapped (0.1140f*x[i+n] + 0.5870f*x[i+2*n]): 1x1 gives 119 instead of 216",
        cu(PIXELS)),
    "cuda_rounds": Case(
        "rgb_to_grayscale_cuda", "roundf() instead of truncating: half the pixels one too high; the 1x1 pixel's fraction is 0.40, so tiny passes",
        cu(PIXELS, but=("tiny",))),
    "cuda_interleaved_hwc": Case(
        "rgb_to_grayscale_cuda", "reads HWC-interleaved x[3*i], x[3*i+1], x[3*i+2] (still inside the input): same as CHW only for 1 pixel",
        cu(PIXELS, but=("tiny",))),
    "cuda_transposed_2d": Case(
        "rgb_to_grayscale_cuda", "2D grid that reads x at row*w + col but writes out[col*h + row]: right only for one-row or one-column images, so 3x3001 fails tall_and_wide",
        cu(PIXELS, but=("tiny",))),
    "cuda_floor_blocks": Case(
        "rgb_to_grayscale_cuda", "n / threads blocks instead of cdiv: the last n % 256 pixels get no thread; 1x1 and seed 7351's 62x1 launch 0 blocks (the memory check runs 1x1 too);"
        " the photo (1,200 x 256) passes",
        cu(NEVER, but=("photo",), tiny="impossible grid", hidden_sizes="impossible grid", memory=RAISED, integrity=PIXELS)),
    "cuda_floor_blocks_no_launch_check": Case(
        "rgb_to_grayscale_cuda", "n / threads blocks and no C10_CUDA_KERNEL_LAUNCH_CHECK: the 0-block launches (1x1, seed 7351's 62x1) fail silently,"
        " so their pixels are never written",
        cu(NEVER, but=("photo",), memory=PIXELS, integrity=PIXELS)),
    "cuda_fixed_grid_no_loop": Case(
        "rgb_to_grayscale_cuda", "a fixed grid of 32 blocks of 256 with no grid-stride loop: covers only the first 8,192 pixels (3x3001 has 9,003)",
        cu(NEVER, but=("tiny", "ragged_sizes", "memory", "integrity"), memory=PIXELS)),  # memory runs 3x3001 too
    "cuda_stride_loop_no_block_offset": Case(
        "rgb_to_grayscale_cuda", "grid-stride loop that starts at threadIdx.x, not the global index: only pixels with i % stride < 256 are written (7x37 has 259)",
        cu(NEVER, but=("tiny",), memory=PIXELS, integrity=PIXELS)),
    "cuda_even_pixels_only": Case(
        "rgb_to_grayscale_cuda", "two pixels a thread (i = 2*index, half the blocks) but only out[i] is written: every odd pixel is skipped",
        cu(NEVER, but=("tiny",), memory=PIXELS, integrity=PIXELS)),
    "cuda_writes_into_input": Case(
        "rgb_to_grayscale_cuda", "stores the grey into x[i] (the red plane) and copies it to out[i]: right pixels, changed input",
        cu(INPUT)),
    "cuda_torch_ops_no_kernel": Case(
        "rgb_to_grayscale_cuda", "writes the kernel but the wrapper computes with PyTorch (to float, mul, add, to uint8) and never launches it: right pixels",
        {"integrity": "PyTorch operation"}),
    "cuda_kernel_then_torch_cast": Case(
        "rgb_to_grayscale_cuda", "kernel writes float grey values into a float32 tensor; the wrapper converts it with .to(torch::kByte): right pixels",
        {"integrity": "PyTorch operation"}),
    "cuda_returns_input": Case(
        "rgb_to_grayscale_cuda", "launches the kernel but returns input instead of output: shape (3, h, w)",
        cu(SHAPE)),
    "cuda_photo_shape": Case(
        "rgb_to_grayscale_cuda", "returns output.view({600, 512}), the photo's shape, from a flat output: raises for every other size",
        cu(RAISED, but=("photo",))),
    "cuda_race_atomic_slot": Case(
        "rgb_to_grayscale_cuda", "each thread takes its output slot from a global atomicAdd counter: pixels land in arrival order, which changes between runs; 1 pixel is right",
        cu(PIXELS, but=("tiny",), integrity="a race")),
    "cuda_stride_loop_never_advances": Case(
        "rgb_to_grayscale_cuda", "grid-stride loop written `i + stride` instead of `i += stride`: every thread with a pixel loops forever",
        cu("did not finish")),
    "cuda_far_write": Case(
        "rgb_to_grayscale_cuda", "writes out[i + 100000000]: an illegal address far outside any tensor",
        # On a GPU, whether memory 100 MB past the output is mapped depends on what the process holds there (the H200,
        # an answer's checks sharing one process: the large image's write once landed and its pixels were never
        # written); the memory check finds it every time.
        cpu=cu("outside a tensor", memory=OOB), gpu=cu(ANY, memory=OOB)),
    "cuda_huge_allocation": Case(
        "rgb_to_grayscale_cuda", "allocates a scratch tensor of 1L << 42 bytes (4 TiB) before the output",
        cu("more memory than there is")),
    "cuda_wrapper_null_pointer": Case(
        "rgb_to_grayscale_cuda", "the wrapper increments a call counter through a global int* that is still nullptr: segfault on the CPU",
        cu("crashed")),
    "cuda_signed_char": Case(
        "rgb_to_grayscale_cuda", "char* instead of unsigned char*: channel values above 127 read as negative (the 1x1 pixel gives 246, not 216)",
        cu(PIXELS)),
    "cuda_float_output": Case(
        "rgb_to_grayscale_cuda", "output allocated as float32 (right values, wrong dtype)",
        cu("dtype")),
    "cuda_flat_output": Case(
        "rgb_to_grayscale_cuda", "output allocated as {n} and returned flat, not (h, w)",
        cu(SHAPE)),
    "cuda_fixed_point_weights": Case(
        "rgb_to_grayscale_cuda", "integer weights (77*r + 150*g + 29*b) >> 8: about 1 pixel in 8 one level off; the 1x1 pixel (216.6 -> 216) survives",
        cu(PIXELS, but=("tiny",))),
    "cuda_2048_threads": Case(
        "rgb_to_grayscale_cuda", "2048 threads a block (CUDA allows at most 1024): every launch fails",
        cu("impossible grid")),

    # ---- L3, CUDA: known right -----------------------------------------------------------------------
    "cuda_right_block_128": Case("rgb_to_grayscale_cuda", "right: the lecture's 1D kernel with 128 threads a block"),
    "cuda_right_block_1024": Case("rgb_to_grayscale_cuda", "right: the lecture's 1D kernel with 1024 threads a block"),
    "cuda_right_block_32": Case("rgb_to_grayscale_cuda", "right: the lecture's 1D kernel with 32 threads a block (187,500 blocks for large)"),
    "cuda_right_2d_grid": Case("rgb_to_grayscale_cuda", "right: 2D grid of dim3(32, 8) blocks, row/col indexing, guard row < h && col < w"),
    "cuda_right_grid_stride": Case("rgb_to_grayscale_cuda", "right: grid-stride loop over a fixed grid of 40 blocks of 256"),
    "cuda_right_no_fma": Case("rgb_to_grayscale_cuda", "right: __fmul_rn/__fadd_rn, no fused multiply-add (like -fmad=false)"),
    "cuda_right_restrict_names": Case("rgb_to_grayscale_cuda", "right: other names, const unsigned char* __restrict__, early return, 512 threads"),
    "cuda_right_uint8_t": Case("rgb_to_grayscale_cuda", "right: a uint8_t `uchar` typedef and data_ptr<uint8_t>()"),
    "cuda_right_empty_like_view": Case("rgb_to_grayscale_cuda", "right: output = torch::empty_like(input[0]), n from output.numel()"),
    "cuda_right_device_helper": Case("rgb_to_grayscale_cuda", "right: the weighted sum in a __device__ helper function"),
    "cuda_right_prints_stderr": Case("rgb_to_grayscale_cuda", "right, and the wrapper prints its grid with fprintf(stderr, ...) (must keep full marks)"),
    "cuda_right_early_return": Case("rgb_to_grayscale_cuda", "right: returns early when n == 0, then launches without an if"),
    "cuda_right_integer_arithmetic": Case("rgb_to_grayscale_cuda", "right: exact integers, (2989*r + 5870*g + 1140*b) / 10000"),
    "cuda_right_double_constants": Case("rgb_to_grayscale_cuda", "right: constants without the f suffix, so the sum is computed in double"),

    # ---- Triton: known wrong -------------------------------------------------------------------------
    # A mask left out (or one lane too wide) leaves every pixel right: the overrun lands past the tensors, where
    # nothing looks. On a GPU compute-sanitizer reports it; in CPU mode the interpreter reads and writes the host's
    # memory at that address without a word, and only the memory check's guarded memory turns it into a verdict.
    "triton_no_mask": Case(
        "rgb2grey_triton", "no mask at all: the last program's idle lanes read past x (blue plane) and write past out; the pixels are right",
        {"memory": OUTSIDE}),
    "triton_store_unmasked": Case(
        "rgb2grey_triton", "masked loads, unmasked tl.store: the idle lanes of the last program write past out (bob's mistake)",
        {"memory": OUTSIDE}),
    "triton_red_load_unmasked": Case(
        "rgb2grey_triton", "the red plane's tl.load left unmasked: its lanes stay inside x (3n bytes) wherever n > 256/3,"
        " so only the memory check's smallest sizes (1x1, one row or column of 40) see it; every pixel is right",
        {"memory": OUTSIDE}),
    "triton_mask_off_by_one": Case(
        "rgb2grey_triton", "mask = offs <= n: lane n reads x[3n] and writes out[n], one byte past each (every ragged size has a lane n)",
        {"memory": OUTSIDE}),
    "triton_offsets_wrong_size": Case(
        "rgb2grey_triton", "offs = pid*256 + ... in a kernel launched with BLOCK_SIZE=128 and cdiv(n, 128) programs: every other 128 pixels get no lane;"
        " images of up to 128 pixels pass (tiny; CPU mode's 40-pixel tall and wide ones, not the GPU's 1000-pixel ones)",
        cpu=tri(NEVER, but=("tiny", "tall_and_wide"), memory=PIXELS, integrity=PIXELS),
        gpu=tri(NEVER, but=("tiny",), memory=PIXELS, integrity=PIXELS)),
    "triton_program_id_axis_1": Case(
        "rgb2grey_triton", "offs from tl.program_id(1) on a 1D grid: every program gets id 0 and writes the first 256 pixels; images of up to"
        " 256 pixels pass (tiny; CPU mode's 40-pixel tall and wide ones)",
        cpu=tri(NEVER, but=("tiny", "tall_and_wide"), memory=PIXELS, integrity=PIXELS),
        gpu=tri(NEVER, but=("tiny",), memory=PIXELS, integrity=PIXELS)),
    "triton_floor_grid": Case(
        "rgb2grey_triton", "n // 256 programs instead of triton.cdiv: the last n % 256 pixels get no lane; a 1x1 image launches 0 programs (Triton"
        " launches nothing, no error); the photo (75 or 1,200 programs of 256) passes",
        tri(NEVER, but=("photo",), memory=PIXELS, integrity=PIXELS)),
    "triton_writes_nothing": Case(
        "rgb2grey_triton", "computes the grey values and never calls tl.store: no pixel is written (on a GPU the memory"
        " check's fresh allocations hold no fill to show it, only wrong pixels)",
        tri(NEVER, memory=PIXELS, integrity=NEVER)),
    "triton_green_blue_swapped": Case(
        "rgb2grey_triton", "loads green from x_ptr + 2*n and blue from x_ptr + n: the planes swapped (1x1 gives 119 instead of 216)",
        tri(PIXELS)),
    "triton_bt709_weights": Case(
        "rgb2grey_triton", "the BT.709 weights 0.2126, 0.7152, 0.0722: wrong on almost every pixel, the 1x1 one too",
        tri(PIXELS)),
    "triton_hwc_interleaved": Case(
        "rgb2grey_triton", "loads x_ptr + 3*offs, + 1, + 2 (HWC) from a CHW image: the same as CHW only for 1 pixel",
        tri(PIXELS, but=("tiny",))),
    "triton_rounds": Case(
        "rgb2grey_triton", "adds 0.5 before .to(tl.uint8): rounds instead of truncating; the 1x1 pixel's fraction is 0.40, so tiny passes",
        tri(PIXELS, but=("tiny",))),
    "triton_float_output": Case(
        "rgb2grey_triton", "out created as float32 and the float sum stored into it: right values, wrong dtype",
        tri("dtype")),
    "triton_torch_beside_dummy": Case(
        "rgb2grey_triton", "launches its kernel on 0 pixels for show and computes the image with PyTorch: right pixels",
        {"integrity": "PyTorch operation"}),

    # ---- Triton: known right -------------------------------------------------------------------------
    "triton_right_block_1024": Case("rgb2grey_triton", "right: the lesson's kernel launched with BLOCK_SIZE=1024"),
    "triton_right_block_64_constant": Case(
        "rgb2grey_triton", "right: other names, BLOCK = 64 a module constant, uint8 * float promoted by Triton, a grid lambda of meta"),
    "triton_right_2d_grid": Case(
        "rgb2grey_triton", "right: a 2D grid of 16x32 tiles, rows and cols from tl.program_id(0) and (1), a 2D mask rows < h & cols < w"),
    "triton_right_loop_over_blocks": Case(
        "rgb2grey_triton", "right: at most 8 programs, each looping over every 8th block of 128 (tl.num_programs as the stride)"),
    "triton_right_masked_other": Case("rgb2grey_triton", "right: masked loads with other=0"),
    "triton_right_integer_arithmetic": Case("rgb2grey_triton", "right: exact integers in int32, (2989*r + 5870*g + 1140*b) // 10000"),
}

"""Student trials on the Triton lessons (issue 38): each mistake a new student made in grayscale/05_triton and
matmul/06_triton, as the lesson's own solution cell with that one change, the cell that showed the message, and the
phrases that name the fix.

A Trial's cell is the lesson's solution cell (read from source/, the solution regions' markers dropped) with each
(old, new) of `change` applied; `run` is the cell the student ran next: a test cell's check, the lesson's demo
(isolated(...)), or a direct call. `must` are phrases the output and message must hold (a tuple inside: one of
them), `must_not` the wrong hints they once gave. `gpu` gives another `must` where a GPU shows something else (its
compiler, not the interpreter, runs the kernel); `cpu_only` says why a trial means nothing on a GPU.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Trial:
    lesson: str                # "grayscale" (05_triton) or "matmul" (06_triton)
    what: str                  # the mistake, as a student makes it
    change: tuple              # (old, new) replacements in the lesson's solution cell
    run: str                   # the cell that shows the message
    must: tuple                # phrases the printed output and message must contain
    must_not: tuple = ()
    gpu: tuple = None          # must on a GPU, where it differs
    cpu_only: str = None       # why the trial says nothing on a GPU
    stdin: str = None          # what the student types (pdb's prompt)


GREY_OFFS = "    offs = pid*BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
GREY_LAUNCH = "rgb2grey_kernel[(triton.cdiv(n, 256),)]"
ONE_ROW = "torch.randint(0, 256, (3, 1, 300), dtype=torch.uint8, device=device())"  # two programs of 256 lanes
PRINT_IN_CHECKS = "in a process of their own, which shows nothing"
GPU_PRINT = "one string first"  # the hint for what a GPU's compiler says of print(offs)
FAULT = "mask every tl.load and tl.store"
CUDA_WORDS = ("if (i < n)", "C++ wrapper", "threadIdx", "blockIdx")  # the CUDA rung's hints, wrong here
DUMP = ("Fatal Python error", "Extension modules", "Current thread")  # faulthandler's, not the student's

TRIALS = {
    # ---- print and breakpoint() in a kernel: the lesson says they work in CPU mode ------------------------------
    "print_offs_direct_call": Trial(
        "grayscale", "print(offs) in the kernel, the launch function called in a cell",
        ((GREY_OFFS, GREY_OFFS + "    print(offs)\n"),), f"rgb2grey_triton({ONE_ROW})",
        ("255]", "[256"), cpu_only="on a GPU print(offs) does not compile (the lesson says so)"),
    "print_offs_isolated": Trial(
        "grayscale", "print(offs) in the kernel, the lesson's isolated(...) call",
        ((GREY_OFFS, GREY_OFFS + "    print(offs)\n"),), f"isolated(rgb2grey_triton)({ONE_ROW})",
        ("255]", "[256"), DUMP, gpu=("is not string", GPU_PRINT)),
    "print_offs_check": Trial(
        "grayscale", "print(offs) in the kernel, a test cell's check",
        ((GREY_OFFS, GREY_OFFS + "    print(offs)\n"),), 'check_rgb2grey_triton(rgb2grey_triton, "tiny")',
        ("tiny passed", PRINT_IN_CHECKS, "`print(offs)` in rgb2grey_kernel"), gpu=("is not string", GPU_PRINT)),
    "print_two_labels_check": Trial(
        "grayscale", "print('pid', pid, 'offs', offs): two strings, which a GPU's tl.device_print refuses",
        ((GREY_OFFS, GREY_OFFS + "    print('pid', pid, 'offs', offs)\n"),),
        'check_rgb2grey_triton(rgb2grey_triton, "ragged")', ("ragged passed", PRINT_IN_CHECKS),
        gpu=("cannot convert", GPU_PRINT)),
    "breakpoint_direct_call": Trial(
        "grayscale", "breakpoint() in the kernel, the launch function called in a cell: pdb stops in each program",
        ((GREY_OFFS, GREY_OFFS + "    breakpoint()\n"),), f"rgb2grey_triton({ONE_ROW})",
        ("(Pdb)", "array([  0,   1,   2,", "array([256, 257, 258,"), stdin="p offs\nc\n" * 2,
        cpu_only="breakpoint() stops only in the interpreter"),
    "breakpoint_isolated": Trial(
        "grayscale", "breakpoint() in the kernel, the lesson's isolated(...) call",
        ((GREY_OFFS, GREY_OFFS + "    breakpoint()\n"),), f"isolated(rgb2grey_triton)({ONE_ROW})",
        ("not stopping", "no keyboard", "in rgb2grey_kernel: `breakpoint()`", "call your launch function in a cell"),
        ("BdbQuit",), gpu=("breakpoint() stops only in CPU mode",)),
    "breakpoint_check": Trial(
        "grayscale", "breakpoint() in the kernel, a test cell's check",
        ((GREY_OFFS, GREY_OFFS + "    breakpoint()\n"),), 'check_rgb2grey_triton(rgb2grey_triton, "tiny")',
        ("tiny passed", PRINT_IN_CHECKS, "`breakpoint()` in rgb2grey_kernel"), ("BdbQuit",),
        gpu=("breakpoint() stops only in CPU mode",)),

    # ---- what the lesson's text says --------------------------------------------------------------------------
    "no_casts_written": Trial(
        "grayscale", "no .to(tl.float32) on the loads, no .to(tl.uint8) on the store: Triton converts both itself "
                     "(uint8 times a float is float32; tl.store converts to the output's uint8, truncating)",
        ((".to(tl.float32)", ""), (").to(tl.uint8), mask=mask)", ", mask=mask)"), ("(0.2989*r", "0.2989*r")),
        'check_rgb2grey_triton(rgb2grey_triton, "photo")', ("photo passed",)),

    # ---- the index and the grid -------------------------------------------------------------------------------
    "offset_not_scaled": Trial(
        "grayscale", "offs = pid + tl.arange(0, BLOCK_SIZE): the program's number not scaled by BLOCK_SIZE",
        ((GREY_OFFS, "    offs = pid + tl.arange(0, BLOCK_SIZE)\n"),), 'check_rgb2grey_triton(rgb2grey_triton, "ragged")',
        ("2 programs of 256 program lanes", "1 apart instead of 256", "offs = tl.program_id(0)*BLOCK_SIZE"),
        ("too few programs",)),
    "program_id_axis_1": Trial(
        "grayscale", "tl.program_id(1) on a grid of one axis", (("tl.program_id(0)", "tl.program_id(1)"),),
        'check_rgb2grey_triton(rgb2grey_triton, "ragged")',
        ("reads `tl.program_id(1)`", "every launch's grid has 1 axis", "tl.program_id(0)")),
    "grid_not_a_tuple": Trial(
        "grayscale", "the grid given as an int: kernel[triton.cdiv(n, 256)](...)",
        ((GREY_LAUNCH, "rgb2grey_kernel[triton.cdiv(n, 256)]"),), 'check_rgb2grey_triton(rgb2grey_triton, "tiny")',
        ("has no len()", "the grid must be a tuple", "in rgb2grey_triton: `rgb2grey_kernel[triton.cdiv(n, 256)]")),
    "if_on_a_block": Trial(
        "grayscale", "`if offs < n:` around the loads and the store instead of a mask",
        (("    mask = offs < n\n", "    if offs < n:\n"), ("    r = tl.load", "        r = tl.load"),
         ("    g = tl.load", "        g = tl.load"), ("    b = tl.load", "        b = tl.load"),
         ("    tl.store", "        tl.store")),
        'check_rgb2grey_triton(rgb2grey_triton, "tiny")',
        ("Boolean value of Tensor", "if offs < n:", "that is a mask", "tl.load(x_ptr + offs, mask=mask)")),
    "pointer_subscripted": Trial(
        "grayscale", "x_ptr[offs] instead of tl.load(x_ptr + offs, mask=mask)",
        (("r = tl.load(x_ptr + offs, mask=mask)", "r = x_ptr[offs]"),), 'check_rgb2grey_triton(rgb2grey_triton, "tiny")',
        ("`x_ptr[offs]` in rgb2grey_kernel indexes a pointer", "tl.load(x_ptr + offs, mask=mask)")),

    # ---- the memory check: the smallest sizes are where lanes run furthest past a tensor -------------------------
    "red_load_unmasked_memory": Trial(
        "grayscale", "the red plane loaded without its mask: past x only where a program has more lanes than 3n "
                     "(a 1x1 image, one row of 40)",
        (("r = tl.load(x_ptr + offs, mask=mask)", "r = tl.load(x_ptr + offs)"),),
        'check_rgb2grey_triton(rgb2grey_triton, "memory")',
        ("found an access outside a tensor", "ragged, tiny and tall_wide sizes",
         "in rgb2grey_kernel: `r = tl.load(x_ptr + offs).to(tl.float32)`", "mask=mask"),
        gpu=("found an access outside a tensor", "Invalid __global__ read", "mask=mask")),
    "red_load_unmasked_ragged": Trial(
        "grayscale", "the same answer on the ragged sizes: right there, and nothing past x",
        (("r = tl.load(x_ptr + offs, mask=mask)", "r = tl.load(x_ptr + offs)"),),
        'check_rgb2grey_triton(rgb2grey_triton, "ragged")', ("ragged passed",)),

    # ---- matmul ---------------------------------------------------------------------------------------------
    "m_strides_swapped_demo": Trial(
        "matmul", "m's strides passed in the wrong order, the lesson's isolated(...) demo: element (r, i) read at "
                  "r + i*784, far past m",
        (("m.stride(0), m.stride(1)", "m.stride(1), m.stride(0)"),),
        "isolated(matmul_triton)(x.to(device()), w8.to(device()))",
        ("crashed with SIGSEGV", "in matmul_kernel: `a = tl.load(m_ptr", FAULT, "strides passed in the wrong order"),
        CUDA_WORDS + DUMP, cpu_only="on a GPU the reads past m fault or find other memory, by chance; the memory "
                                    "check (compute-sanitizer) is what sees them there"),
    "accumulator_only_in_k_loop": Trial(
        "matmul", "acc = tl.zeros(...) moved into the k loop: Triton's compiler knows no acc after it",
        (("    acc = tl.zeros((BM, BN), dtype=tl.float32)\n    for k0 in range(0, k, BK):\n",
          "    for k0 in range(0, k, BK):\n        acc = tl.zeros((BM, BN), dtype=tl.float32)\n"),),
        'check_matmul_triton(matmul_triton, "tiny")',
        ("acc is not defined", "tl.store(out_ptr", "set before it too", "acc = tl.zeros((BM, BN), dtype=tl.float32) "
         "before the loop")),
    "accumulator_reset_in_k_loop": Trial(
        "matmul", "acc = tl.zeros(...) again inside the k loop: each tile of k starts the sum again",
        (("    for k0 in range(0, k, BK):\n",
          "    for k0 in range(0, k, BK):\n        acc = tl.zeros((BM, BN), dtype=tl.float32)\n"),),
        'check_matmul_triton(matmul_triton, "ragged")',
        ("the product of the last tile of k alone", "before `for k0 in range(0, k, BK)`", "acc += tl.dot"),
        ("cannot name",)),
    "store_rows_and_columns_swapped": Trial(
        "matmul", "the store's pointers with the strides swapped: out[c, r] = element (r, c), the transposed product "
                  "on a square output",
        (("out_ptr + rows[:, None]*stride_or + cols[None, :]*stride_oc",
          "out_ptr + rows[:, None]*stride_oc + cols[None, :]*stride_or"),),
        'check_matmul_triton(matmul_triton, "large")',
        ("transposed product", "out.stride(0) as stride_or"), ("cannot name", "blockIdx")),
    "tile_too_small_for_tl_dot": Trial(
        "matmul", "BK = 4: a k side smaller than tl.dot takes", (("BM, BN, BK = 64, 64, 32", "BM, BN, BK = 64, 64, 4"),),
        'check_matmul_triton(matmul_triton, "tiny")',  # Triton 3.8 (CPU mode here) asks K >= 8: told the grader's 16
        ("K >= 16", "the k side (BK) must be at least 16"), ("at least 8",)),
    "tile_k_8_for_tl_dot": Trial(
        "matmul", "BK = 8: a k side Triton 3.8 compiles and the grading host's Triton 3.6 refuses",
        (("BM, BN, BK = 64, 64, 32", "BM, BN, BK = 64, 64, 8"),), 'check_matmul_triton(matmul_triton, "tiny")',
        ("K >= 16", "the k side (BK) must be at least 16")),
}

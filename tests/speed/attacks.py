"""The attacks on the speed tests' timing (tests/test_speed.py runs them): each must earn no speed points.

An attack is a file `<name>.cu` here, its cuda_src after cuda_begin (a grayscale attack's after the lesson's kernel
too, which it launches: only the wrapper cheats); ATTACKS says which check times it and
the phrase its failure must contain on a GPU and in CPU mode (COURSE_SPEED_CPU=1: the same protocol, a wall
clock). Most pass every correctness check and cheat only when timed, so the timing's own defences are what stop
them; two are stopped by the checks a kernel must pass before it is timed. On a GPU those checks run in one
process per answer (harness/spare.py), so an attack that counts calls cheats during them and fails one: its test
then times it without the checks too, so that the timing's own defence is shown to stop it as well.
"""
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
WRONG = "the speed test checks the output of every call"  # a timed call's output was wrong


@dataclass(frozen=True)
class Attack:
    check: str      # the check the speed test cell calls
    what: str       # one line: the trick
    gpu: str        # a phrase its failure must contain on a GPU
    cpu: str = None  # ... and in CPU mode, where it differs

    def source(self, name):
        """The attack's cuda_src: cuda_begin, the lesson's grayscale kernel for a grayscale attack, then its file."""
        from course import cuda_begin
        from course.topics.grayscale import CUDA_SRC
        kernel = CUDA_SRC[len(cuda_begin):CUDA_SRC.index("torch::Tensor rgb_to_grayscale")]
        return cuda_begin + (kernel if self.check == "check_rgb2grey_cuda" else "") + (HERE / f"{name}.cu").read_text()


ATTACKS = {
    "cache_by_address": Attack("check_rgb2grey_cuda", "caching between calls: an input at the last one's address is "
                               "taken for the same image (the allocator hands fresh inputs the same address)", WRONG),
    "saved_tensor_per_size": Attack("check_rgb2grey_cuda", "a saved tensor: the first output of a size returned for "
                                    "every later image of that size", WRONG),
    "counts_calls": Attack("check_rgb2grey_cuda", "detects the timing loop by counting calls: from the ninth on, "
                           "the eighth's output", WRONG),
    "timing_loop_by_rate": Attack("check_rgb2grey_cuda", "detects the timing loop by the rate of calls: the last "
                                  "output again within 2 s", WRONG),
    "other_stream": Attack("check_rgb2grey_cuda", "launches on a stream of its own and returns before its kernel ends",
                           "still running elsewhere", cpu="does not compile"),
    "part_of_output": Attack("check_rgb2grey_cuda", "writes part of the output: half the pixels from the ninth call "
                             "on", WRONG),
    "leftover_of_reference": Attack("check_rgb2grey_cuda", "reads a result left in memory by the course's kernel: no "
                                    "launch from the ninth call on", WRONG),
    "library_renamed": Attack("check_matmul_tiled_cuda", "cuBLAS under another name: matmul_static calls "
                              "torch::matmul", "fails the 'integrity' check"),
    "only_timed_sizes": Attack("check_matmul_tiled_cuda", "correct only for the sizes timed (multiples of 16): the "
                               "tiled kernel without bounds (which check fails it first depends on what lies past "
                               "the inputs: tiny in CPU mode, ragged on the H200)",
                               "the speed test times only a kernel that passes the exercise's checks"),
}

"""The attacks on the speed tests' timing (tests/test_speed.py runs them): each must earn no speed points.

An attack is a file `<name>.cu` here, its cuda_src after cuda_begin (a grayscale attack's after the lesson's kernel
too, which it launches: only the wrapper cheats); ATTACKS says which check times it and
the phrase its failure must contain on a GPU and in CPU mode (COURSE_SPEED_CPU=1: the same protocol, a wall
clock). Most pass every correctness check and cheat only when called many times, as a timing loop does: the speed
test's record of their launches (13 calls, harness/record.py) sees them launch otherwise on a later call than on the
first, and refuses to time them (harness/replay.py); the stream attack launches on a stream of its own, which is
refused too; two are stopped by the checks a kernel must pass before it is timed. On a GPU those checks run in one
process per answer (harness/spare.py), so an attack that counts calls cheats during them and fails one: its test
then times it without the checks too, so that the record's own defence is shown to stop it as well.

REPLAY_ATTACKS are of another kind: answers that are right on every call, whose host code (a C++ wrapper, a Triton
launch function in Python) cheats the process that times it: it patches the timer, runs its kernel where the timer
does not look, keeps the machine busy while the course's kernel runs, or rewrites the course's build files. A Triton
one is a `<name>.py` here, its launch function after the Triton lesson's kernel (course.topics.matmul.TRITON_SRC).
Each names its honest twin, the same kernel without the cheat (twin() gives it), and tests/test_speed.py's
test_each_replay_attack_gets_at_most_what_its_honest_twin_gets asserts that it gets no more than that twin: what a
timing that replays the recorded launches in a process of its own, which never loads the host code, guarantees.
"""
from dataclasses import dataclass
from pathlib import Path

from course.harness.replay import DIFFERED as REPLAYED  # the record saw a later call launch otherwise

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Attack:
    check: str      # the check the speed test cell calls
    what: str       # one line: the trick
    gpu: str = None  # a phrase its failure must contain on a GPU (ATTACKS)
    cpu: str = None  # ... and in CPU mode, where it differs
    honest: str = None  # REPLAY_ATTACKS: its honest twin, the same kernel without the cheat (twin() gives it)

    def source(self, name):
        """The attack's answer. CUDA: cuda_begin, the lesson's grayscale kernel for a grayscale attack, then its file.
        Triton: a Source, the Triton lesson's module up to its launch function, then the file's launch function."""
        if self.check == "check_matmul_triton":
            from course.harness.triton import Source
            from course.topics.matmul import TRITON_SRC
            lesson = TRITON_SRC.text[:TRITON_SRC.text.index("def matmul_triton")]
            return Source(TRITON_SRC.name, lesson + (HERE / f"{name}.py").read_text())
        from course import cuda_begin
        from course.topics.grayscale import CUDA_SRC
        kernel = CUDA_SRC[len(cuda_begin):CUDA_SRC.index("torch::Tensor rgb_to_grayscale")]
        return cuda_begin + (kernel if self.check == "check_rgb2grey_cuda" else "") + (HERE / f"{name}.cu").read_text()

    def twin(self):
        """The honest twin's answer: the lesson's own kernel, which the attack launches with its cheat added."""
        if self.check == "check_matmul_triton":
            from course.topics.matmul import TRITON_SRC
            return TRITON_SRC
        if self.check == "check_rgb2grey_cuda":
            from course.topics.grayscale import CUDA_SRC
            return CUDA_SRC
        raise ValueError(f"no honest twin for {self.check}")


ATTACKS = {
    "cache_by_address": Attack("check_rgb2grey_cuda", "caching between calls: an input at the last one's address is "
                               "taken for the same image (the allocator hands fresh inputs the same address)", REPLAYED),
    "saved_tensor_per_size": Attack("check_rgb2grey_cuda", "a saved tensor: the first output of a size returned for "
                                    "every later image of that size", REPLAYED),
    "counts_calls": Attack("check_rgb2grey_cuda", "detects the timing loop by counting calls: from the ninth on, "
                           "the eighth's output", REPLAYED),
    "timing_loop_by_rate": Attack("check_rgb2grey_cuda", "detects the timing loop by the rate of calls: the last "
                                  "output again within 2 s", REPLAYED),
    "other_stream": Attack("check_rgb2grey_cuda", "launches on a stream of its own and returns before its kernel ends",
                           "a stream of its own", cpu="does not compile"),
    "part_of_output": Attack("check_rgb2grey_cuda", "writes part of the output: half the pixels from the ninth call "
                             "on", REPLAYED),
    "leftover_of_reference": Attack("check_rgb2grey_cuda", "reads a result left in memory by the course's kernel: no "
                                    "launch from the ninth call on", REPLAYED),
    "library_renamed": Attack("check_matmul_tiled_cuda", "cuBLAS under another name: matmul_static calls "
                              "torch::matmul", "fails the 'integrity' check"),
    "only_timed_sizes": Attack("check_matmul_tiled_cuda", "correct only for the sizes timed (multiples of 16): the "
                               "tiled kernel without bounds (which check fails it first depends on what lies past "
                               "the inputs: tiny in CPU mode, ragged on the H200)",
                               "the speed test times only a kernel that passes the exercise's checks"),
}

LESSON_GREY = "the grayscale lesson's kernel and wrapper (course.topics.grayscale.CUDA_SRC)"
LESSON_TRITON = "the Triton lesson's matmul (course.topics.matmul.TRITON_SRC)"
REPLAY_ATTACKS = {
    "patches_timer_triton": Attack("check_matmul_triton", "the Triton launch function patches its process's timer on "
                                   "its first call: torch.cuda.Event.elapsed_time after each of its calls (a GPU), or "
                                   "course.harness.wire.write's times of it (CPU mode), 8x less", honest=LESSON_TRITON),
    "patches_timer_pybind": Attack("check_rgb2grey_cuda", "the C++ wrapper runs Python through pybind11 on its first "
                                   "call to patch the same timer (elapsed_time, or wire.write in CPU mode), 8x less",
                                   honest=LESSON_GREY),
    "patches_timer_slot_call": Attack("check_rgb2grey_cuda", "the same patch of the timer from the C++ wrapper through "
                                      "Python's C API, the builtin exec called through its type's tp_call slot: none "
                                      "of the symbols the integrity check looks for", honest=LESSON_GREY),
    "own_stream_during_hold": Attack("check_rgb2grey_cuda", "launches on a non-blocking stream of its own while the "
                                     "timer's hold runs on the current one, and waits for it on the host "
                                     "(cudaStreamSynchronize) before returning", honest=LESSON_GREY),
    "busy_thread": Attack("check_rgb2grey_cuda", "a background thread started on the first call keeps the GPU (CPU "
                          "mode: the CPU) busy whenever the answer is not running, to slow the course's kernel",
                          honest=LESSON_GREY),
    "rewrites_reference_build": Attack("check_rgb2grey_cuda", "overwrites the course's kernel's compiled module (in "
                                       "place, mapped by the timing process), its build folder and the shared "
                                       "objects, from Python (exec through its type's slot)", honest=LESSON_GREY),
}

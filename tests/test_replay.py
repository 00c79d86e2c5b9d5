"""The speed test's replay (course/harness/record.py, replay.py): a record mapped to a plan, what is refused, the
device code read from a module, and a Triton answer's file reduced to its checked kernels."""
import ast
import os
import shutil
import subprocess

import pytest

from course.harness import record, replay
from course.harness.wire import Recorded

IN, OUT, WORK = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000


def _hex(value, size=8):
    return value.to_bytes(size, "little").hex()


def _call(args, stream=0, blocks=((WORK, 4096),), grid=(4, 1, 1), delta=0):
    """A recorded call of one launch (pointer arguments given as addresses), its input at IN + delta."""
    launch = {"entry": 0, "name": "_Z1kPhS_i", "dims": [*grid, 256, 1, 1, 0], "stream": stream,
              "args": [["p", 8, _hex(a + delta if IN <= a < OUT else a)] if isinstance(a, int) else a for a in args]}
    return {"launches": [launch], "stream": 0, "inputs": [[IN + delta, 3000]],
            "output": {"span": [OUT, 1000], "shape": [10, 100], "stride": [100, 1], "dtype": "uint8", "device": "cuda"},
            "blocks": [list(b) for b in blocks]}


def test_each_pointer_is_mapped_to_an_input_the_output_or_a_workspace_and_scalars_kept():
    n = ["s", 4, _hex(1000, 4)]
    calls = [_call([IN, OUT + 10, WORK + 64, 0, n], delta=d) for d in (0, 0x5000)]
    plan = replay.plan(Recorded(calls=calls), triton=False, cpu=False)
    args = plan["launches"][0]["args"]
    assert args == [["p", ["in", 0, 0]], ["p", ["out", 10]], ["p", ["work", 0, 64]], ["p", ["null"]], ["s", n[2]]]
    assert plan["work"] == [4096] and plan["output"]["shape"] == [10, 100] and plan["output_bytes"] == 1000


@pytest.mark.parametrize("call, says", [
    (_call([IN + 0x9000000, OUT]), "points into memory the speed test does not know"),
    (_call([IN, OUT, ["s", 16, _hex(OUT + 8, 8) + _hex(7, 8)]]), "an address inside a value of 16 bytes"),
    (_call([IN, OUT], stream=0x1234), "a stream of its own"),
    ({**_call([IN, OUT]), "launches": []}, "launched no kernel of its own"),
])
def test_what_the_replay_cannot_time_is_refused_saying_why(call, says):
    with pytest.raises(replay.Refused, match=says):
        replay.plan(Recorded(calls=[call, call]), triton=False, cpu=False)


def test_a_call_that_launches_otherwise_than_the_first_is_refused_naming_it():
    same, other = _call([IN, OUT]), _call([IN, OUT], grid=(2, 1, 1))
    with pytest.raises(replay.Refused, match=f"{replay.DIFFERED} 3 than on the first"):
        replay.plan(Recorded(calls=[same, same, other]), triton=False, cpu=False)
    skipped = {**same, "launches": []}  # a later call that returns a saved output launches nothing
    with pytest.raises(replay.Refused, match=f"{replay.DIFFERED} 2 "):
        replay.plan(Recorded(calls=[same, skipped]), triton=False, cpu=False)


def test_a_gpu_replay_needs_the_kernels_mangled_name_and_cpu_mode_its_entry():
    call = _call([IN, OUT])
    call["launches"][0]["name"] = "-"
    with pytest.raises(replay.Refused, match="cannot name"):
        replay.plan(Recorded(calls=[call, call]), triton=False, cpu=False)
    call["launches"][0]["entry"] = -1
    with pytest.raises(replay.Refused, match="not in the module's table"):
        replay.plan(Recorded(calls=[call, call]), triton=False, cpu=True)


def test_a_modules_note_is_read_and_anything_else_refused():
    text = "launch 1 _Z1kPfi 2 1 1 128 1 1 0 0 p8:0000000000007f00 s4:0a000000\n"
    [launch] = record.cuda_launches(text)
    assert launch == {"entry": 1, "name": "_Z1kPfi", "dims": [2, 1, 1, 128, 1, 1, 0], "stream": 0,
                      "args": [["p", 8, "0000000000007f00"], ["s", 4, "0a000000"]]}
    for bad in ("full", "launch 1 k 2 1\n", text.replace("s4:0a000000", "s4:0a")):
        with pytest.raises(ValueError):
            record.cuda_launches(bad)


def test_a_triton_launch_passing_something_else_than_tensors_and_numbers_is_refused():
    launch = {"kernel": "k", "grid": [4, 1, 1], "options": {},
              "args": [["x", {"ptr": IN, "dtype": "float32"}], ["out", {"ptr": OUT, "dtype": "float32"}],
                       ["n", {"value": 10}]]}
    call = {**_call([]), "launches": [launch]}
    plan = replay.plan(Recorded(calls=[call, call]), triton=True, cpu=False)
    assert plan["launches"][0]["args"][:2] == [["x", {"at": ["in", 0, 0], "dtype": "float32"}],
                                               ["out", {"at": ["out", 0], "dtype": "float32"}]]
    launch["args"][2] = ["n", {"opaque": "Generator"}]
    with pytest.raises(replay.Refused, match="n is a Generator"):
        replay.plan(Recorded(calls=[call, call]), triton=True, cpu=False)


KERNELS = '''import torch
import triton
import triton.language as tl
import os
BLOCK = 64
WIDE = tl.constexpr(128)
STOLEN = open("/etc/hostname").read()
@triton.jit
def copy_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
def copy(x):
    os.system("echo patched")
    y = torch.empty_like(x)
    copy_k[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel())
    return y
'''


def test_only_a_triton_files_imports_literal_constants_and_checked_kernels_are_run():
    kept = replay.kernel_statements(KERNELS)
    text = ast.unparse(kept)
    assert "def copy_k" in text and "BLOCK = 64" in text and "WIDE = tl.constexpr(128)" in text
    assert "def copy(" not in text and "STOLEN" not in text and "import os" not in text


@pytest.mark.parametrize("kernel, says", [
    ("@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x):\n    pass\n", "decorator triton.autotune"),
    ("@triton.jit\ndef k(x, n=len('ab')):\n    pass\n", "default value len"),
    ("@triton.jit\ndef k(x: print('hi')):\n    pass\n", "annotation print"),
    ("@triton.jit(do_not_specialize=[print])\ndef k(x):\n    pass\n", "not literals"),
])
def test_a_triton_kernel_whose_definition_would_run_code_is_refused(kernel, says):
    with pytest.raises(replay.Refused, match=says):
        replay.kernel_statements("import triton\n" + kernel)


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"), reason="needs nvcc")
def test_the_device_code_is_read_from_an_objects_fatbin_section(tmp_path):
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    subprocess.run([nvcc, "-c", "-arch=sm_90", str(tmp_path / "k.cu"), "-o", str(tmp_path / "k.o")], check=True,
                   timeout=300)
    [image] = replay.fatbins(tmp_path / "k.o")
    assert int.from_bytes(image[:4], "little") == replay.FATBIN_MAGIC and len(image) > 100
    (tmp_path / "host.o").write_bytes(b"\x7fELF\x02" + b"\0" * 200)
    with pytest.raises(replay.Refused):
        replay.fatbins(tmp_path / "host.o")


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="the CUDA allocator's history: a GPU")
def test_a_workspace_is_found_with_the_size_it_was_allocated_with():
    import torch
    seen = {}

    def fn():
        work = torch.empty(1000, dtype=torch.uint8, device="cuda")
        seen["ptr"] = work.data_ptr()
        return torch.zeros(10, device="cuda")
    _, blocks = record.allocated(fn)
    assert [seen["ptr"], 1024] in blocks[:2] or any(a == seen["ptr"] and s >= 1000 for a, s in blocks[:2])

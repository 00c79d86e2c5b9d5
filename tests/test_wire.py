"""The wire between a process that runs student code and the judge (course/harness/wire.py): plain data only.

Nothing in the grading path unpickles what such a process wrote: a scan of the code holds it, a result crafted to run
code when read runs nothing, and a report that is not the plain data its schema allows fails the check.
"""
import json
import os
import re

import pytest
import torch

from course.harness import judge, wire
from course.harness.wire import Job, Result, Run
from course.harness.wire import Timed
from tests.support import ROOT

SCANNED = ("course", "benchmarks")

# what reads an object back by running the code its file names
UNSAFE = re.compile(r"\bpickle\.loads?\b|\bpickle\.Unpickler\b|\bfrom\s+pickle\s+import\b|\bcloudpickle\b|\bdill\b|"
                    r"\bmarshal\.loads?\b|\bjoblib\.load\b|\bshelve\b|allow_pickle\s*=\s*True|weights_only\s*=\s*False")


def _call_text(text, start):
    """The text of the call whose '(' is at start, to its matching ')'."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
    return text[start:]


def unsafe_reads(root=ROOT):
    """file:line: what, for every read in course/ and benchmarks/ that could run code a file names."""
    found = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text()
            line = lambda i: text.count("\n", 0, i) + 1  # noqa: E731
            where = path.relative_to(root)
            for m in UNSAFE.finditer(text):
                found.append(f"{where}:{line(m.start())}: {m.group(0)}")
            for m in re.finditer(r"\btorch\.load\s*\(", text):
                call = _call_text(text, m.end() - 1)
                if not re.search(r"weights_only\s*=\s*True", call):
                    found.append(f"{where}:{line(m.start())}: torch.load without weights_only=True")
    return found


def test_nothing_in_the_course_or_benchmarks_unpickles():
    found = unsafe_reads()
    assert not found, "reads that could run code a file names:\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_unsafe_read(tmp_path):
    # the scan itself can fail: a known-bad file is found, line by line
    (tmp_path / "course").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "course" / "bad.py").write_text(
        "import pickle, dill\n"
        "a = pickle.load(f)\n"
        "b = torch.load(p, weights_only=False)\n"
        "c = torch.load(\n    p,\n    map_location='cpu')\n"
        "d = torch.load(p, weights_only=True)\n"
        "e = marshal.loads(data)\n")
    found = unsafe_reads(tmp_path)
    assert sorted(int(f.split(":")[1]) for f in found) == [1, 2, 3, 3, 4, 8], found  # line 7 reads weights only
    assert all(f.startswith("course/bad.py:") for f in found)


# ---- round trips ---------------------------------------------------------------------------------------------------

def _job(**more):
    fields = dict(module="answer.so", func="rgb_to_grayscale", inputs=[(torch.arange(12, dtype=torch.uint8), 0.5, 3)],
                  fills=[(12, 0xAB)], mode="run", cpu=True, exercise=("course.topics.grayscale", "rgb2grey"),
                  wheres=["a tiny image"])
    fields.update(more)
    return Job(**fields)


def test_a_job_a_result_and_a_speed_report_come_back_as_they_were_written(tmp_path):
    x = torch.arange(300, dtype=torch.float32)
    job = _job(inputs=[(x, 0.5, 128), (x[:7], 2.0, 32)], fills=[(0, 0)] * 2, timing=(1, 5),
               speed={"rung": "cuda", "contenders": [{"name": "yours", "module": "a.so", "loader": None}]})
    digest = wire.write(job, tmp_path / "job.pt")
    back = wire.read(tmp_path / "job.pt", Job, digest)
    assert back.fills == [(0, 0), (0, 0)] and back.exercise == job.exercise and back.timing == (1, 5)
    assert isinstance(back.inputs[1], tuple) and torch.equal(back.inputs[1][0], x[:7]) and back.inputs[1][1:] == (2.0, 32)
    assert back.speed == job.speed
    result = Result(runs=[Run(value=(x, torch.zeros(2, dtype=torch.int64)), device="cpu", contiguous=True, again=x,
                              events=[("cpu", "aten::empty"), ("cuda", "k(float*)")]),
                          Run(value=[1, 2.5, "three", None, True])])
    wire.write(result, tmp_path / "result.pt")
    back = wire.read(tmp_path / "result.pt", Result)
    first, second = back.runs
    assert isinstance(first.value, tuple) and torch.equal(first.value[0], x) and first.value[1].dtype == torch.int64
    assert first.events == [("cpu", "aten::empty"), ("cuda", "k(float*)")] and torch.equal(first.again, x)
    assert second.value == [1, 2.5, "three", None, True] and second.device is None and second.events == []
    timed = Timed(times={"yours": [0.1, 0.2], "reference": [0.1]}, wrong={"args": (x,), "value": x, "call": 3},
                  gpu={"name": "NVIDIA H200", "l2_bytes": 1 << 20})
    wire.write(timed, tmp_path / "timed.pt")
    back = wire.read(tmp_path / "timed.pt", Timed)
    assert back.times == timed.times and back.wrong["call"] == 3 and torch.equal(back.wrong["args"][0], x)


def test_a_value_the_wire_does_not_carry_keeps_only_its_type_name(tmp_path):
    import numpy as np
    wire.write(Result(runs=[Run(value=np.zeros(3))]), tmp_path / "result.pt")
    value = wire.read(tmp_path / "result.pt", Result).runs[0].value
    assert type(value).__name__ == "ndarray" and not isinstance(value, np.ndarray)


# ---- a result that runs code when read -----------------------------------------------------------------------------

class _Touch:
    """What a patched torch.save in a student's child leaves: an object whose unpickling runs a command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _crafted(path, marker, legacy=False):
    envelope = {"wire": wire.VERSION, "kind": "Result", "json": json.dumps({"record": {"error": None, "runs": []}}),
                "tensors": [_Touch(marker)]}
    torch.save(envelope, path, _use_new_zipfile_serialization=not legacy)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_a_result_crafted_to_run_code_when_read_is_refused_and_runs_nothing(tmp_path, legacy):
    marker = tmp_path / "was-here"
    _crafted(tmp_path / "result.pt", marker, legacy)
    torch.save(_Touch(marker), tmp_path / "bare.pt")
    for path in (tmp_path / "result.pt", tmp_path / "bare.pt"):
        with pytest.raises(wire.Unreadable):
            wire.read(path, Result)
    assert not marker.exists()
    # the unsafe reader would have run it: the file is the attack it claims to be
    torch.load(tmp_path / "bare.pt", weights_only=False)
    assert marker.exists()


def test_the_judge_fails_a_check_whose_result_runs_code_when_read(tmp_path):
    marker = tmp_path / "was-here"
    digest = wire.write(_job(), tmp_path / "job.pt")
    _crafted(tmp_path / "result.pt", marker)
    judge.judge(tmp_path / "job.pt", tmp_path / "result.pt", tmp_path / "verdict.json", digest)
    outcome = json.loads((tmp_path / "verdict.json").read_text())
    assert outcome["passed"] is False and "could not read your function's results" in outcome["message"]
    assert not marker.exists()


def test_the_judge_reads_only_its_own_copy_of_the_job(tmp_path):
    # a child that rewrites the job (another verdict, one that passes anything) is refused: the digest differs
    digest = wire.write(_job(), tmp_path / "job.pt")
    wire.write(Result(), tmp_path / "result.pt")
    wire.write(_job(verdict="builtins:print"), tmp_path / "job.pt")
    with pytest.raises(wire.Unreadable, match="not the one the check wrote"):
        judge.judge(tmp_path / "job.pt", tmp_path / "result.pt", tmp_path / "verdict.json", digest)
    digest = wire.write(_job(verdict="builtins:print"), tmp_path / "job.pt")  # and no job names another judge
    with pytest.raises(wire.Unreadable, match="not one of the course's verdicts"):
        judge.judge(tmp_path / "job.pt", tmp_path / "result.pt", tmp_path / "verdict.json", digest)
    assert not (tmp_path / "verdict.json").exists()


# ---- schema violations ---------------------------------------------------------------------------------------------

def _envelope(path, record, tensors=(), kind="Result", **more):
    top = {"wire": wire.VERSION, "kind": kind, "json": json.dumps(record), "tensors": list(tensors)}
    top.update(more)
    torch.save(top, path)


RUN = {"value": None, "device": None, "contiguous": None, "input_changed": False, "again": None, "events": []}


def _result(**run):
    return {"record": {"error": None, "runs": [{"record": {**RUN, **run}}]}}


@pytest.mark.parametrize("record, tensors, said", [
    (_result(input_changed="no"), (), "input_changed: a str, expected a bool"),
    (_result(events=[{"tuple": ["cpu", 3]}]), (), "events[0][1]: a int, expected a str"),
    (_result(events=[["cpu", "aten::mul"]]), (), "events[0]: expected a tuple"),
    (_result(value={"tensor": 1}), [torch.zeros(1)], "a tensor reference 1 to no tensor"),
    (_result(value={"tensor": 0}), [torch.zeros(2, dtype=torch.complex64)], "tensor 0"),
    (_result(value={"tensor": 0}), [7], "tensor 0 is a int"),
    (_result(value={"__class__": "Pass"}), (), "not one of tensor"),
    (_result(value={"opaque": "x); import os; os.system('touch x') #"}), (), "a malformed opaque"),
    ({"record": {"error": None, "runs": [], "passed": True}}, (), "fields it does not have: passed"),
    ({"record": {"runs": []}}, (), "fields missing: error"),
    ({"record": {"error": None, "runs": {"dict": {}}}}, (), "runs: a dict, expected a list"),
    ({"record": {"error": ["no"], "runs": []}}, (), "error: a list, expected a str"),
    ({"record": {"error": None, "runs": [1]}}, (), "runs[0]: not a Run record"),
    (_result(value=json.loads("[" * 40 + "]" * 40)), (), "nested too deep"),
], ids=["type", "tuple item", "list for tuple", "tensor index", "dtype", "not a tensor", "unknown tag", "opaque name",
        "extra field", "missing field", "container", "optional", "nested record", "depth"])
def test_a_report_that_breaks_the_schema_is_refused(tmp_path, record, tensors, said):
    _envelope(tmp_path / "result.pt", record, tensors)
    with pytest.raises(wire.Unreadable) as info:
        wire.read(tmp_path / "result.pt", Result)
    assert said in str(info.value)


def test_a_report_of_another_kind_or_shape_is_refused(tmp_path):
    path = tmp_path / "result.pt"
    _envelope(path, _result(), kind="Job")
    with pytest.raises(wire.Unreadable, match="expected a 'Result'"):
        wire.read(path, Result)
    _envelope(path, _result(), passed=True)
    with pytest.raises(wire.Unreadable, match="not a record of the check's format"):
        wire.read(path, Result)
    torch.save({"wire": wire.VERSION, "kind": "Result", "json": b"{}", "tensors": []}, path)
    with pytest.raises(wire.Unreadable, match="not a record of the check's format"):
        wire.read(path, Result)
    torch.save({"wire": torch.ones(2), "kind": "Result", "json": "{}", "tensors": []}, path)
    with pytest.raises(wire.Unreadable, match="not a record of the check's format"):
        wire.read(path, Result)
    path.write_text("{}")
    with pytest.raises(wire.Unreadable, match="zip format"):
        wire.read(path, Result)


def test_a_result_that_is_a_link_or_a_pipe_is_not_taken(tmp_path):
    wire.write(Result(), tmp_path / "real.pt")
    (tmp_path / "link.pt").symlink_to(tmp_path / "real.pt")
    with pytest.raises(wire.Unreadable, match="could not be opened"):
        wire.taken(tmp_path / "link.pt")
    os.mkfifo(tmp_path / "pipe.pt")
    with pytest.raises(wire.Unreadable, match="not a plain file"):
        wire.taken(tmp_path / "pipe.pt")
    with pytest.raises(wire.Unreadable, match="more than"):
        wire.taken(tmp_path / "real.pt", limit=10)
    assert wire.loads(wire.taken(tmp_path / "real.pt"), Result) == Result()


# ---- evidence from outside: what the compiled objects call -------------------------------------------------------

from course.harness import integrity  # noqa: E402

TAMPER = ROOT / "tests" / "tamper" / "grayscale"
CLEAN = [("cpu", "aten::empty"), ("cpu", "cuda_cpu_launch::k")]


@pytest.mark.parametrize("symbol, what", [
    ("at::_ops::mul_Tensor::call(at::Tensor const&, at::Tensor const&)", "aten::mul"),
    ("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "aten::mm"),
    ("at::cpu::add(at::Tensor const&, at::Tensor const&, c10::Scalar const&)", "aten::add"),
    ("c10::Dispatcher::findSchemaOrThrow(char const*, char const*)", "PyTorch's dispatcher"),
    ("cublasSgemm_v2", "a library's kernels"),
    ("PyImport_ImportModule", "Python"),
    ("pybind11::module_::import(char const*)", "Python"),
    ("dlsym", "a function looked up at run time"),
    ("at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>)", None),
    ("at::_ops::to_dtype::call(at::Tensor const&, c10::ScalarType, bool, bool)", None),
    ("at::_ops::select_int::call(at::Tensor const&, long, c10::SymInt)", None),
    ("at::cuda::getCurrentCUDAStream(signed char)", None),
    ("PyErr_Occurred", None),  # torch's headers bring much of Python's API into a wrapper that never runs Python
    ("torch::jit::kModuleInstanceInfo", None),
    ("__course_launch_k::run(course_split::Launch const&, float*, int)", None),
])
def test_what_a_symbol_of_the_students_objects_computes_with(symbol, what):
    assert integrity.computing(symbol) == what


def _run(events, value=torch.zeros(2, dtype=torch.uint8)):
    return Run(value=value, again=value.clone(), events=events)


def test_profiler_events_can_fail_an_answer_but_never_pass_one_alone():
    launches = integrity.Evidence(launches=("k",), computing=())
    integrity.judge("f", "a tiny image", _run(CLEAN), None, evidence=launches)
    computes = integrity.Evidence(launches=("k",), computing=(("at::_ops::mul_Scalar::call(...)", "aten::mul"),))
    with pytest.raises(AssertionError, match=r"PyTorch operation\(s\) aten::mul .*at::_ops::mul_Scalar::call"):
        integrity.judge("f", "a tiny image", _run(CLEAN), None, evidence=computes)
    with pytest.raises(AssertionError, match="calls Python"):
        integrity.judge("f", "a tiny image", _run(CLEAN), None,
                        evidence=integrity.Evidence(("k",), (("PyImport_ImportModule", "Python"),)))
    with pytest.raises(AssertionError, match="no kernel of its own"):  # events that show a launch do not make one
        integrity.judge("f", "a tiny image", _run(CLEAN), None, evidence=integrity.Evidence((), ()))
    with pytest.raises(AssertionError, match="aten::add"):  # events still fail an answer the objects pass
        integrity.judge("f", "a tiny image", _run(CLEAN + [("cpu", "aten::add")]), None, evidence=launches)


def _source(student):
    from course import cuda_begin
    ns = {"cuda_begin": cuda_begin, "cpp_src": "", "load_cuda": lambda *args, **kwargs: None}
    exec((TAMPER / student / "rgb_to_grayscale_cuda.py").read_text(), ns)
    return ns["cuda_src"]


@pytest.fixture
def markers(tmp_path, monkeypatch):
    """Where an attack's code would leave its file if it ran (the checks' processes start in tmp_path)."""
    from course.harness import children
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(children, "_server", None)  # a check server started here, in tmp_path
    yield lambda: sorted(p.name for folder in (tmp_path, ROOT) for p in folder.glob("*-was-here"))


@pytest.mark.skipif(not __import__("course.device", fromlist=["cpu_mode"]).cpu_mode(), reason="CPU mode's checks")
def test_a_forged_profiler_passes_the_events_but_not_the_compiled_objects(tmp_path, markers):
    # victor's wrapper computes with at::mul and the like, and makes the profiler in its process report its kernel
    import subprocess
    import sys
    from course import check_rgb2grey_cuda, load_cuda
    from course.harness.children import memory_module
    module = load_cuda(_source("victor"), "torch::Tensor rgb_to_grayscale(torch::Tensor input);", ["rgb_to_grayscale"])
    x = torch.randint(0, 256, (3, 5, 7), dtype=torch.uint8)
    wire.write(Job(module=module.__file__, func="rgb_to_grayscale", inputs=[(x,)], fills=[(35, 0xAB)],
                   mode="integrity", cpu=True, memory_module=memory_module()), tmp_path / "job.pt")
    subprocess.run([sys.executable, "-m", "course.harness.tasks", "run", str(tmp_path / "job.pt"),
                    str(tmp_path / "result.pt")], check=True, timeout=600)
    run = wire.read(tmp_path / "result.pt", Result).runs[0]
    assert not integrity.torch_ops(run.events) and integrity.kernels(run.events, None)[0]  # the forgery took
    integrity.judge("rgb_to_grayscale", "x", run, None)  # which the events alone would pass
    evidence = integrity.object_evidence(module.__file__)
    assert {"aten::mul", "aten::add"} <= {what for _, what in evidence.computing}
    with pytest.raises(AssertionError, match="PyTorch operation"):
        check_rgb2grey_cuda(_source("victor"), "integrity")
    check_rgb2grey_cuda(_source("victor"), "tiny")  # its output is right: only integrity fails
    assert not markers()


@pytest.mark.skipif(not __import__("course.device", fromlist=["cpu_mode"]).cpu_mode(), reason="CPU mode's checks")
def test_a_cuda_wrapper_that_forges_its_result_gets_nothing_and_runs_nothing_in_the_judge(markers):
    from course import check_rgb2grey_cuda
    alice = (ROOT / "examples" / "grayscale" / "alice" / "rgb_to_grayscale_cuda.py").read_text()
    from course import cuda_begin
    ns = {"cuda_begin": cuda_begin, "cpp_src": "", "load_cuda": lambda *args, **kwargs: None}
    exec(alice, ns)
    check_rgb2grey_cuda(ns["cuda_src"], "integrity")  # the lesson's kernel: its objects launch it, nothing computes
    for case in ("tiny", "integrity"):
        with pytest.raises(AssertionError, match="could not read your function's results"):
            check_rgb2grey_cuda(_source("sybil"), case)
    assert not markers()


@pytest.mark.skipif(not __import__("course.device", fromlist=["cpu_mode"]).cpu_mode(), reason="CPU mode's checks")
def test_a_triton_launch_function_that_forges_its_result_gets_nothing_and_runs_nothing_in_the_judge(tmp_path, markers):
    import importlib.util
    from course import check_rgb2grey_triton
    path = tmp_path / "trudy.py"
    path.write_text("import torch\nimport triton\nimport triton.language as tl\n\n"
                    + (TAMPER / "trudy" / "rgb2grey_triton.py").read_text())
    spec = importlib.util.spec_from_file_location("trudy", path)
    trudy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trudy)
    for case in ("tiny", "integrity"):
        with pytest.raises(AssertionError, match="could not read your function's results"):
            check_rgb2grey_triton(trudy.rgb2grey_triton, case)
    assert not markers()

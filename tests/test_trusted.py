"""The one trusted grading pass (course/grading/nbgrader/trusted.py): test cells judged by nbgrader's process, not the kernel.

The pipeline tests (tests/test_pipeline.py) grade the tamper students end to end; these pin the pieces: what a
judge accepts as a test cell, what an answer may carry back, and a notebook whose kernel fights its judge.
"""
import os
import pickle

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook

from course.grading.cell_roles import check_call
from course.grading.nbgrader.trusted import DEMO_NOTE, OPAQUE, TrustedExecute, child_checks, decode, encode, needs_demo, unjudgeable

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("source, why", [
    ("check_rgb2grey(rgb2grey_py)\ncheck_rgb2grey(rgb2grey_py, 'tiny')", r"2 call\(s\)"),
    ("x = 1\ncheck_rgb2grey(rgb2grey_py)", "1 other statement"),
    ("check_rgb2grey(make())", "called on a name"),
    ("check_rgb2grey(f, size)", "must be literals"),
    ("check_rgb2grey(f", "not valid Python"),
])
def test_a_test_cell_the_judge_cannot_run_is_refused_with_the_reason(source, why):
    with pytest.raises(ValueError, match=why):
        check_call(source)


def test_release_names_each_unjudgeable_test_cell():
    def cell(source, gid):
        return new_code_cell(source, metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": gid,
                                                            "points": 1, "locked": True}})
    nb = new_notebook(cells=[cell('"""ok"""\ncheck_rgb2grey(rgb2grey_py, "tiny")', "fine"),
                             cell("assert rgb2grey_py(x) is not None", "bare_assert"),
                             cell("check_everything(rgb2grey_py)", "unknown")])
    found = dict(unjudgeable(nb))
    assert set(found) == {"bare_assert", "unknown"}
    assert "exactly one call" in found["bare_assert"] and "not a check the course exports" in found["unknown"]


def test_the_cases_a_notebook_checks_in_child_processes_are_read_from_its_test_cells_only():
    # course grade starts a notebook's children as it starts (harness/cuda.py: prepare_children): on a GPU, a kept
    # child for the checks' calls, and the spares of its sanitized checks
    def cell(source, gid, grade=True):
        return new_code_cell(source, metadata={"nbgrader": {"grade": grade, "solution": False, "grade_id": gid,
                                                            "points": 1, "locked": True}})
    nb = new_notebook(cells=[cell('check_rgb2grey_cuda(src, "memory")', "a"),
                             cell("check_rgb2grey_cuda(src, case='race', seed=3)", "b"),
                             cell('check_rgb2grey(rgb2grey_py, "large")', "python"),
                             cell('check_rgb2grey_cuda(src, "tiny")\nprint(1)', "unjudgeable"),
                             cell('check_rgb2grey_cuda(src, "integrity")', "lesson", grade=False)])
    assert child_checks(nb) == (True, {"memory", "race"})
    nb.cells = nb.cells[2:]
    assert child_checks(nb) == (False, set())  # a Python rung's checks run in the notebook's judge: none to start


def test_an_answer_travels_as_data_and_an_object_as_its_type_name():
    value = (torch.arange(6).view(2, 3), [1, 2.5, "x", None], {"k": torch.ones(2)}, object())
    back = decode(encode(("returned", value, (), {})))
    assert torch.equal(back[1][0], value[0]) and back[1][1] == [1, 2.5, "x", None]
    assert type(back[1][3]).__name__ == "object" and not isinstance(back[1][3], dict)
    assert OPAQUE not in repr(back)


def test_a_reply_that_would_run_code_when_read_is_refused_and_runs_nothing(tmp_path):
    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))
    import io
    buf = io.BytesIO()
    torch.save(("returned", Payload(), (), {}), buf)
    with pytest.raises(pickle.UnpicklingError):
        decode(buf.getvalue())
    assert not (tmp_path / "ran").exists()


def _graded_notebook(*cells):
    def test(source, gid):
        return new_code_cell(source, metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": gid,
                                                            "points": 1, "locked": True}})
    return new_notebook(cells=[new_code_cell(c) if isinstance(c, str) else test(*c) for c in cells],
                        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


GREY = ("import torch\n"
        "def rgb2grey_py(x):\n"
        "    return (0.2989*x[0] + 0.5870*x[1] + 0.1140*x[2]).to(torch.uint8)\n")


def run(nb, tmp_path):
    return TrustedExecute().preprocess(nb, {"metadata": {"path": str(tmp_path)}})[0]


def test_a_right_answer_passes_and_a_redefined_check_in_the_kernel_changes_nothing(tmp_path):
    nb = run(_graded_notebook(GREY, ('check_rgb2grey(rgb2grey_py, "tiny")', "right")), tmp_path)
    assert nb.cells[1].outputs == [{"output_type": "stream", "name": "stdout", "text": "rgb2grey_py: tiny passed\n"}]
    wrong = GREY.replace("0.2989", "0.3") + "def check_rgb2grey(*args, **kwargs):\n    print('looks fine')\n"
    nb = run(_graded_notebook(wrong, ('check_rgb2grey(rgb2grey_py, "ragged")', "tampered")), tmp_path)
    assert [o["output_type"] for o in nb.cells[1].outputs] == ["error"]
    assert "pixels are wrong" in nb.cells[1].outputs[0]["evalue"]
    assert nb.metadata["course"]["judged"] == "trusted: 1 test cells judged outside the kernel"


def test_a_kernel_that_dies_while_the_judge_asks_fails_that_cell_and_the_later_ones(tmp_path):
    dies = "import os\ndef rgb2grey_py(x):\n    os.kill(os.getpid(), 9)\n"
    nb = run(_graded_notebook(dies, ('check_rgb2grey(rgb2grey_py, "tiny")', "dies"), "print('after')"), tmp_path)
    assert nb.cells[1].outputs[-1]["ename"] == "KernelStopped"
    assert nb.cells[2].outputs[0]["ename"] == "NotRun"
    assert "kernel stopped in cell 1" in nb.metadata["course"]["kernel_stopped"]


def test_a_builtin_exception_the_students_code_raised_comes_back_as_that_exception():
    from course.grading.nbgrader.trusted import _raised
    assert type(_raised(("raised", "IndexError", "index 7 is out of range"))) is IndexError
    odd = _raised(("raised", "MyError", "boom"))
    assert type(odd).__name__ == "MyError" and str(odd) == "boom"


def test_grading_skips_a_demo_cell_and_says_so(tmp_path):
    nb = _graded_notebook(GREY, "open('demo-ran', 'w').write('x')", ('check_rgb2grey(rgb2grey_py, "tiny")', "right"))
    nb.cells[1].metadata["tags"] = ["demo"]
    nb = run(nb, tmp_path)
    assert not (tmp_path / "demo-ran").exists()
    assert nb.cells[1].outputs[0]["text"] == DEMO_NOTE and "passed" in nb.cells[2].outputs[0]["text"]


def test_release_refuses_a_cell_that_needs_what_only_a_demo_defines():
    nb = _graded_notebook("import torch", "big = torch.ones(3)\nfor k in range(2): pass", "print(big.sum(), k)",
                          "big = torch.zeros(2)\ndef f(k):\n    return k", "print(big, f(1))",
                          "%time small = big + 1", "print(small)")
    for i in (1, 5):
        nb.cells[i].metadata["tags"] = ["demo"]
    assert needs_demo(nb) == [(2, ["big", "k"]), (6, ["small"])]  # cell 4's big is its own; f's k an argument


PEEKS = ("import sys\nfrom course import check_rgb2grey\n"
         "def rgb2grey_py(x):\n"
         "    seen, f = [], sys._getframe()\n"
         "    while f is not None:  # every frame's names, then every cell the kernel ran\n"
         "        seen.append(repr(f.f_locals)[:3000])\n"
         "        f = f.f_back\n"
         "    seen.append(repr(get_ipython().user_ns.get('In')))\n"
         "    print(' | '.join(seen))\n"
         "    raise ValueError(' | '.join(seen))\n")


def test_a_hidden_tests_seed_never_reaches_the_kernel_nor_its_feedback(tmp_path):
    hidden = '### BEGIN HIDDEN TESTS\ncheck_rgb2grey(rgb2grey_py, "random", seed=987654321)\n### END HIDDEN TESTS'
    nb = run(_graded_notebook(PEEKS, (hidden, "hidden")), tmp_path)
    shown = "".join(o.get("evalue", "") + o.get("text", "") + "".join(o.get("traceback", []))
                    for o in nb.cells[1].outputs)
    assert "raised ValueError" in shown and "987654321" not in shown
    # the message still comes from the kernel's run of the check (on the judge's inputs, without the seed)
    assert "'seed': None" in shown


def test_a_visible_test_still_gets_the_notebooks_own_message(tmp_path):
    nb = run(_graded_notebook(PEEKS, ('check_rgb2grey(rgb2grey_py, "tiny")', "tiny")), tmp_path)
    assert 'check_rgb2grey(rgb2grey_py, "tiny")' in nb.cells[1].outputs[-1]["evalue"]  # the cell as the kernel ran it


def test_a_grader_fault_stops_the_students_grading_and_is_no_failed_test(tmp_path, monkeypatch):
    import course
    from course.device import GraderFault
    from course.harness.rungs import FUNCTION

    def check_rgb2grey(fn, case="photo", seed=None):
        raise GraderFault("compute-sanitizer is not installed on this grading host")
    check_rgb2grey.answer = FUNCTION
    monkeypatch.setattr(course, "check_rgb2grey", check_rgb2grey)
    with pytest.raises(GraderFault, match="compute-sanitizer"):
        run(_graded_notebook(GREY, ('check_rgb2grey(rgb2grey_py, "tiny")', "tiny"), "print('after')"), tmp_path)


CHEAT_L1 = ("import torch\nfrom course import check_rgb2grey, run_kernel\n"
            "def rgb2grey_k(i, x, out, n):\n"
            "    if i == 0:  # the whole image at once, then nothing\n"
            "        r, g, b = x.tensor[:n].float(), x.tensor[n:2*n].float(), x.tensor[2*n:].float()\n"
            "        out.tensor[:] = (0.2989*r + 0.5870*g + 0.1140*b).to(torch.uint8)\n"
            "def rgb2grey_pyk(x):\n"
            "    c, h, w = x.shape\n"
            "    n = h*w\n"
            "    res = torch.empty(n, dtype=x.dtype)\n"
            "    run_kernel(rgb2grey_k, n, x.flatten(), res, n)\n"
            "    return res.view(h, w)\n")


def test_the_judge_fails_a_kernel_that_breaks_the_one_thread_rule(tmp_path):
    hidden = '### BEGIN HIDDEN TESTS\ncheck_rgb2grey(rgb2grey_pyk, "random", seed=4242)\n### END HIDDEN TESTS'
    nb = run(_graded_notebook(CHEAT_L1, ('check_rgb2grey(rgb2grey_pyk, "ragged")', "ragged"), (hidden, "hidden")),
             tmp_path)
    for cell in nb.cells[1:]:
        message = cell.outputs[-1]["evalue"]
        assert "thread i=0 of run_kernel ran a vectorised PyTorch operation" in message
        assert "a kernel computes only its own pixel" in message


FORGED_TILES = ("import torch\nfrom course import blk_kernel2d_shar, cdiv, check_matmul_tiled, dim3, ladder\n"
                "def matmul_tiled_bk(blockidx, threadidx, blockdim, shared, syncthreads, m, n, out, h, w, k, tw):\n"
                "    ladder.record()['writes'] += 1  # the counts the tiled check reads, forged\n"
                "    ladder.record()['syncs'] += 1\n"
                "    r, c = blockidx.y*blockdim.y + threadidx.y, blockidx.x*blockdim.x + threadidx.x\n"
                "    if r < h and c < w:\n"
                "        out[r*w + c] = sum(m[r*k + i] * n[i*w + c] for i in range(k))\n"
                "def matmul_tiled_py(m, n, tw=16):\n"
                "    (h, k), w = m.shape, n.shape[1]\n"
                "    output = torch.empty(h, w)\n"
                "    blk_kernel2d_shar(matmul_tiled_bk, dim3(cdiv(w, tw), cdiv(h, tw)), dim3(tw, tw), 2*tw*tw,\n"
                "                      m.flatten(), n.flatten(), output.flatten(), h, w, k, tw)\n"
                "    return output\n")


def test_forged_shared_memory_counts_do_not_pass_a_tiled_check_whose_source_has_no_tile(tmp_path):
    nb = run(_graded_notebook(FORGED_TILES, ('check_matmul_tiled(matmul_tiled_py, "tiny")', "tiny")), tmp_path)
    assert "without filling shared memory" in nb.cells[1].outputs[-1]["evalue"]


def test_the_kernel_reads_a_timer_cases_request(tmp_path):
    # drill 4's cases hand the student's timer the course's stand-ins for a launch: the kernel must read them
    import torch
    from course.grading.nbgrader.trusted import read_request
    from course.timing import AsyncWork, SlowFirstCall
    torch.save(("call", {"args": (AsyncWork(20.0), SlowFirstCall(600.0, 10.0))}), tmp_path / "request.pt")
    what, arg = read_request(tmp_path / "request.pt")
    assert what == "call" and [type(a) for a in arg["args"]] == [AsyncWork, SlowFirstCall]
    assert arg["args"][0].ms == 20.0

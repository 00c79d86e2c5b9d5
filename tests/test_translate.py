"""to_cuda (course/translate.py): every right Python L2 answer of the corpus and the lessons, translated, built with
load_cuda and judged by the L3 checks; what it refuses, with the line and the reason; the notes it gives."""
import json

import pytest
import torch

import course
from course import cdiv, load_cuda
from course.ladder import recording
from course.translate import CannotTranslate, to_cuda
from tests.support import ROOT

CORPUS = ROOT / "tests" / "corpus"

# The L3 function each translated launcher is called from: the lessons' wrappers, with the launch the Python
# launcher made (its threads, its blocks from cdiv) and the kernel's arguments in the order it passed them.
HOSTS = {
    "grey": ("rgb2grey_pybk", course.check_rgb2grey_cuda, ("tiny", "ragged", "tall_wide", "photo"), r'''
torch::Tensor rgb_to_grayscale(torch::Tensor input) {
    CHECK_INPUT(input);
    int h = input.size(1), w = input.size(2), n = h*w;
    auto output = torch::empty({h, w}, input.options());
    LAUNCH
    return output;
}
'''),
    "matmul": ("matmul_2d", course.check_matmul_cuda, ("tiny", "ragged", "digits"), r'''
torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    CHECK_INPUT(a); CHECK_INPUT(b);
    int h = a.size(0), k = a.size(1), w = b.size(1);
    TORCH_CHECK(k == b.size(0), "the inner sizes differ");
    auto output = torch::empty({h, w}, a.options());
    LAUNCH
    return output;
}
'''),
    "tiled": ("matmul_tiled_py", course.check_matmul_tiled_cuda, ("tiny", "ragged", "digits", "integrity"), r'''
torch::Tensor matmul_static(torch::Tensor a, torch::Tensor b) {
    CHECK_INPUT(a); CHECK_INPUT(b);
    int h = a.size(0), k = a.size(1), w = b.size(1);
    TORCH_CHECK(k == b.size(0), "the inner sizes differ");
    auto output = torch::empty({h, w}, a.options());
    LAUNCH
    return output;
}
'''),
}
ROWS = r'''
torch::Tensor NAME(torch::Tensor x) {
    CHECK_INPUT(x);
    int h = x.size(0), w = x.size(1);
    auto output = torch::empty({h}, x.options());
    LAUNCH
    return output;
}
'''
ROW_CASES = ("ragged", "negative", "long_rows", "no_rows")
HOSTS["row_sum"] = ("row_sum_pybk", course.check_row_sum_cuda, ROW_CASES, ROWS.replace("NAME", "row_sum"))
HOSTS["row_max"] = ("row_max_pybk", course.check_row_max_cuda, ROW_CASES, ROWS.replace("NAME", "row_max"))
# a file's (or solution cell's) name -> the kinds of kernel it holds. Left out: drill 3's drill3_no_guard, whose
# kernel has no guard on purpose (the drill's runner launches exactly n threads): translated, it fails the L3
# ragged sizes as it should.
EXERCISES = {"rgb2grey_bk": ("grey",), "drill1_rungs": ("grey",), "drill9_rgb2grey_bk": ("grey",),
             "matmul_bk": ("matmul",), "matmul_tiled_bk": ("tiled",), "drill2_rows_bk": ("row_sum", "row_max")}


def _corpus_answers():
    """(name, kind, source) of every right answer in the corpus that holds a Python L2 kernel and its launcher."""
    out = []
    for folder in sorted(CORPUS.glob("*/*right*")):
        for path in folder.glob("*.py"):
            for kind in EXERCISES.get(path.stem, ()):
                out.append((f"{folder.parent.name}/{folder.name}", kind, path.read_text()))
    return out


def _lesson_answers():
    """The same from the lessons' and drills' solution cells (the instructor's answers)."""
    out = []
    for path in sorted((ROOT / "source").rglob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
            for kind in EXERCISES.get(gid, ()) if cell["metadata"].get("nbgrader", {}).get("solution") else ():
                out.append((f"{path.parent.name}/{path.stem}", kind, "".join(cell["source"])))
    return out


ANSWERS = _corpus_answers() + _lesson_answers()


def _sample(kind):
    """The Python launcher's inputs and the L3 host's names for their sizes: h, w, k and n all different."""
    g = torch.Generator().manual_seed(0)
    if kind == "grey":
        img = torch.randint(0, 256, (3, 5, 7), dtype=torch.uint8, generator=g)
        return (img,), {5: "h", 7: "w", 35: "n"}
    if kind.startswith("row_"):
        return (torch.randn(5, 7, generator=g),), {5: "h", 7: "w"}
    a, b = torch.rand(5, 3, generator=g), torch.rand(3, 7, generator=g)
    return (a, b), {5: "h", 3: "k", 7: "w"}


def translated(name, kind, source, tmp_path):
    """(the translation, the L3 source around it): the answer's launcher run once on a sample, its kernel and the
    arguments it passed translated, and an L3 function that launches the translation as the launcher did."""
    launcher, check, cases, host = HOSTS[kind]
    path = tmp_path / f"{name.replace('/', '_')}.py"  # inspect reads a kernel's source from its file
    path.write_text("import torch\nfrom course import blk_kernel, blk_kernel2d, blk_kernel2d_shar, cdiv, dim3\n" + source.replace("### BEGIN SOLUTION", "")
                    .replace("### END SOLUTION", ""))
    ns = {"__name__": path.stem}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    inputs, sizes = _sample(kind)
    with recording() as ran:
        result = ns[launcher](*inputs)
    kernel, args, launch = ran["kernel"], [getattr(a, "tensor", a) for a in ran["args"]], ran["launches"][-1]
    t = to_cuda(kernel, *args)
    names = {inputs[0].untyped_storage().data_ptr(): {"grey": "input", "row_sum": "x", "row_max": "x"}.get(kind, "a"),
             result.untyped_storage().data_ptr(): "output"}
    if len(inputs) > 1:
        names[inputs[1].untyped_storage().data_ptr()] = "b"
    # tensors by the memory they share with the launcher's input and output; ints by value (the tile width: its own)
    passed = [names[a.untyped_storage().data_ptr()] if isinstance(a, torch.Tensor) else
              sizes[a] if a in sizes else str(a) for a in args]
    if kind == "grey":
        threads = launch[2]
        assert launch[1] == cdiv(35, threads)  # the launcher's blocks are cdiv(n, threads): the host does the same
        call = f"if (n > 0) {kernel.__name__}(cdiv(n, {threads}), {threads}, {', '.join(passed)});"
    elif kind.startswith("row_"):
        threads = launch[2]
        assert launch[1] == cdiv(5, threads)  # a thread per row: blocks are cdiv(h, threads)
        call = f"if (h > 0) {kernel.__name__}(cdiv(h, {threads}), {threads}, {', '.join(passed)});"
    else:
        tx, ty = launch[2].x, launch[2].y
        assert tuple(launch[1])[:2] == (cdiv(7, tx), cdiv(5, ty))
        shared = f", {2 * tx * ty}" if kind == "tiled" else ""
        call = (f"if (h > 0 && w > 0) {kernel.__name__}({{cdiv(w, {tx}), cdiv(h, {ty})}}, {{{tx}, {ty}}}{shared}, "
                f"{', '.join(passed)});")
    return t, t.cuda_src + host.replace("LAUNCH", call)


def test_the_corpus_and_the_lessons_hold_right_l2_answers_of_each_kind():
    kinds = [kind for _, kind, _ in ANSWERS]
    assert {k: kinds.count(k) >= 2 for k in HOSTS} == {k: True for k in HOSTS}, ANSWERS


@pytest.mark.parametrize("kind", sorted(HOSTS))
def test_every_right_l2_answer_translated_builds_and_passes_the_l3_checks(kind, tmp_path):
    sources = {}
    for name, k, source in ANSWERS:
        if k == kind:
            t, src = translated(name, k, source, tmp_path)
            sources.setdefault(src, []).append(name)  # answers that translate alike are built and checked once
    launcher, check, cases, _ = HOSTS[kind]
    for src, names in sources.items():
        for case in cases:
            try:
                check(src, case)
            except AssertionError as e:
                raise AssertionError(f"{names}, {case}: {e}\n{src}") from None


def _module_file(tmp_path, text):
    path = tmp_path / "kernels.py"
    path.write_text("from course import cdiv\n" + text)
    ns = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


REFUSED = {
    "    xs = [1, 2]\n": "line 4: a Python list: CUDA has no lists",
    "    out[i] = x.sum()\n": "line 4: a method call",
    "    out[i] = torch.sum(x)\n": "line 4: torch.sum: a PyTorch operation",
    "    try:\n        out[i] = x[i]\n    except IndexError:\n        pass\n": "line 4: try/except",
    "    out[i, 0] = x[i]\n": "line 4: a tensor indexed with several indices",
    "    return x[i]\n": "line 4: returns a value",
    "    out[i] = x[i] ** 2\n": "line 4: the operator Pow",
    "    for v in x:\n        out[i] = v\n": "line 4: a for loop over x",
    "    if i < n:\n        j = i\n    out[j] = x[i]\n": "line 6: j was assigned inside a block (line 5)",
    "    out[i] = x.shape[0]\n": "line 4: the attribute .shape",
    "    out[i] = unknown(x[i])\n": "line 4: calls unknown, which to_cuda does not know",
}


@pytest.mark.parametrize("body", sorted(REFUSED), ids=lambda b: REFUSED[b].split(": ")[1][:30])
def test_what_to_cuda_cannot_translate_is_refused_with_its_line_and_the_reason(body, tmp_path):
    ns = _module_file(tmp_path, "def k(blockidx, threadidx, blockdim, x, out, n):\n"
                                "    i = blockidx*blockdim + threadidx\n" + body)
    with pytest.raises(CannotTranslate, match=REFUSED[body].replace("(", r"\(").replace(")", r"\)")):
        to_cuda(ns["k"], torch.zeros(3), torch.zeros(3), 3)


def test_a_kernel_needs_one_example_per_argument_and_tensors_of_known_dtypes(tmp_path):
    ns = _module_file(tmp_path, "def k(blockidx, threadidx, blockdim, x, out, n):\n    out[0] = x[0]\n")
    with pytest.raises(CannotTranslate, match="one example for each argument"):
        to_cuda(ns["k"], torch.zeros(3), torch.zeros(3))
    with pytest.raises(CannotTranslate, match="complex64 tensor"):
        to_cuda(ns["k"], torch.zeros(3, dtype=torch.complex64), torch.zeros(3), 3)


def test_the_translation_keeps_the_python_rungs_meaning_and_notes_where_c_differs(tmp_path):
    ns = _module_file(tmp_path, '''
def smooth_bk(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx*blockdim + threadidx
    if 0 < i < n - 1:
        out[i] = (x[i-1] + x[i] + x[i+1]) / 3
    elif i < n:
        out[i] = x[i]

def hist_bk(blockidx, threadidx, blockdim, x, counts, n, w):
    i = blockidx*blockdim + threadidx
    if i < n:
        counts[x[i*w] // 16] += 1
''')
    smooth = to_cuda(ns["smooth_bk"], torch.zeros(3), torch.zeros(3), 3)
    assert "if (0 < i && i < n - 1) {" in smooth.kernel and "} else if (i < n) {" in smooth.kernel
    assert any("chained" in n for n in smooth.notes)
    grey = to_cuda(ns["hist_bk"], torch.zeros(3, dtype=torch.uint8), torch.zeros(3, dtype=torch.int32), 3, 1)
    assert "counts[(unsigned char)(x[i * w] / 16)] += 1;" in grey.kernel
    notes = "\n".join(grey.notes)
    assert "race" in notes and "atomicAdd" in notes and "truncates toward zero" in notes and "`i * w`" in notes
    assert grey.cpp_src == ("void hist_bk(int blocks, int threads, torch::Tensor x, torch::Tensor counts, int n, "
                            "int w);")


def test_a_float_literal_meeting_a_float32_tensor_is_a_float_and_one_meeting_python_floats_a_double(tmp_path):
    ns = _module_file(tmp_path, '''
def k(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx*blockdim + threadidx
    s = 0.5
    out[i] = 0.2989*x[i] + s*x[i] + float(x[i])*0.5 + i / 2
''')
    t = to_cuda(ns["k"], torch.zeros(3, dtype=torch.uint8), torch.zeros(3), 3)
    assert "double s = 0.5;" in t.kernel
    assert "0.2989f * x[i] + (float)s * x[i] + (double)x[i] * 0.5 + (double)i / 2" in t.kernel


def test_the_translated_launcher_takes_blk_kernels_arguments(tmp_path):
    ns = _module_file(tmp_path, '''
def rgb2grey_bk(blockidx, threadidx, blockdim, x, out, n):
    i = blockidx*blockdim + threadidx
    if i < n:
        out[i] = 0.2989*x[i] + 0.5870*x[i+n] + 0.1140*x[i+2*n]
''')
    img = torch.randint(0, 256, (3, 33, 31), dtype=torch.uint8)
    n = 33 * 31
    t = to_cuda(ns["rgb2grey_bk"], img.flatten(), torch.empty(n, dtype=torch.uint8), n)
    module = load_cuda(t.cuda_src, t.cpp_src, [t.func])
    x = img.flatten().to(course.device())
    out = torch.empty(n, dtype=torch.uint8, device=x.device)
    module.rgb2grey_bk(cdiv(n, 256), 256, x, out, n)  # the course's own right kernel: safe in this process
    assert torch.equal(out.cpu(), course.rgb2grey(img).flatten())
    module.rgb2grey_bk(0, 256, x, out, 0)  # no block: blk_kernel runs nothing, nor does the launcher

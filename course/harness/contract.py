"""The Python rungs' one-thread contract, judged: a kernel that run_kernel, blk_kernel, blk_kernel2d or
blk_kernel2d_shar runs writes only the elements its own index gives it, and computes nothing with vectorised PyTorch
or the course's references.

course/ladder.py gathers the evidence in the process that runs the student's code: after each launch it runs the
judge's picks among the launch's threads (the first, the last and a few at random; whole blocks for the shared-memory
runner) alone, on fresh copies of the tensors with the outputs filled, and notes as plain data what each wrote and
which PyTorch operations on more than a few elements (or which of the course's references) it ran. Evidence from that
process may fail an answer, never pass one: the output is judged first, by the judge's own comparison, and only a
right output meets this rule.
"""
import ast
import hashlib
import math

import torch

PICKS = 3  # threads picked at random in each launch, besides its first and its last


def picks(exercise, where, seed):
    """The judge's picks of the threads each launch of a call runs alone, as fractions in [0, 1): the same for the same
    exercise, case and seed (a re-run gives the same verdict), and no seed can be read back from them."""
    return tuple(int.from_bytes(hashlib.sha256(f"{exercise.name}\0{where}\0{seed}\0{j}".encode()).digest()[:8], "big")
                 / 2 ** 64 for j in range(PICKS))


def _nouns(exercise):
    return exercise.one_thread.get("element", ("element", "elements"))


def _threads(launch):
    """(threads in the launch, threads in one unit run alone, whether a thread's index is one number)."""
    kind = launch["runner"]
    if kind == "run_kernel":
        times = launch["times"]
        return (times, 1, True) if isinstance(times, int) else (times[0] * times[1], 1, False)
    if kind == "blk_kernel":
        return launch["blocks"] * launch["threads"], 1, True
    per = math.prod(launch["threads"])
    total = math.prod(launch["blocks"]) * per
    return total, (per if kind == "blk_kernel2d_shar" else 1), False


def _grid_own(rows, cols, numel, shape):
    """The flat indices a 2D grid's (row, col) pairs may write in a tensor of numel elements that holds the output of
    shape: row*w + col, or col*w + row for a kernel that takes its row from x (covering the output all the same)."""
    if len(shape) != 2 or shape[0] * shape[1] != numel:
        return None
    w = shape[1]
    r, c = rows.reshape(-1, 1), cols.reshape(1, -1)
    return torch.cat([(r * w + c).reshape(-1), (c * w + r).reshape(-1)])


def _own(launch, unit, numel, shape):
    """What one unit may write in a tensor of numel elements: a test (flat indices -> allowed mask), and the words for
    its own element; (None, words) where the launch does not say which elements are its own."""
    kind, at = launch["runner"], unit["at"]
    total, _, one_d = _threads(launch)
    if one_d:  # its index i, and i + k*threads for a kernel that strides over more elements than threads
        own = "out[i]" if kind == "run_kernel" else "out[i], i = blockidx*blockdim + threadidx"
        return (lambda flat: (flat >= at) & ((flat - at) % total == 0)), own
    if kind == "run_kernel":
        i, j = at
        rows, cols = launch["times"]
        allowed = torch.tensor([i * cols + j, j * rows + i])
        return (lambda flat: torch.isin(flat, allowed)), "out[i, j]"
    own = "out[r*w + c], r = blockidx.y*blockdim.y + threadidx.y, c = blockidx.x*blockdim.x + threadidx.x"
    (bx, by, _), threads = (at if kind == "blk_kernel2d_shar" else at[0]), launch["threads"]
    if launch["blocks"][2] != 1 or threads[2] != 1:  # a z axis: which elements are a thread's own is the kernel's say
        return None, own
    if kind == "blk_kernel2d_shar":
        rows, cols = by * threads[1] + torch.arange(threads[1]), bx * threads[0] + torch.arange(threads[0])
    else:
        rows, cols = torch.tensor([by * threads[1] + at[1][1]]), torch.tensor([bx * threads[0] + at[1][0]])
    allowed = _grid_own(rows, cols, numel, shape)
    if allowed is None:
        return None, own
    return (lambda flat: torch.isin(flat, allowed)), own


def _listed(flat):
    shown = ", ".join(f"{int(k):,}" for k in flat[:6])
    return f"{shown}{', ...' if len(flat) > 6 else ''}"


def broken(exercise, launches, shape):
    """The first rule a call's launches broke, as (what happened, the hint), in the lesson's words; None when the
    threads run alone kept to their own elements. shape: the output's, as the judge received it."""
    one, many = _nouns(exercise)
    for launch in launches:
        runner = launch["runner"]
        total, per_unit, one_d = _threads(launch)
        rule = (f"a kernel computes only its own {one}: {runner} calls it once per {one}, and each call computes the "
                f"{one} its index gives it from single values of the inputs")
        for unit in launch["units"]:
            who = f"{unit['who']} of {runner}"
            if unit["refs"]:
                return (f"{who} called the course's {unit['refs'][0]}(), run alone: {rule}.",
                        f"compute this thread's {one} yourself; the course's reference is what your answer is checked "
                        "against.")
            if unit["ops"]:
                name, n = unit["ops"][0]
                return (f"{who} ran a vectorised PyTorch operation ({name}, on {n:,} elements), run alone: {rule}, as "
                        "a CUDA thread would.",
                        f"read single values (x[i], one at a time) and compute this thread's {one} with them; "
                        f"leave whole-tensor operations out of the kernel.")
            for w in unit["wrote"]:
                flat, numel = w["flat"], w["numel"]
                test, own = _own(launch, unit, numel, shape)
                if test is None:
                    limit = per_unit * max(1, math.ceil(numel / max(total, 1)))
                    extra = flat if len(flat) > limit else flat[:0]
                else:
                    extra = flat[~test(flat)]
                if len(extra):
                    n = len(flat)
                    what = f"{n:,} {many}" if n > 1 else f"{one} {int(flat[0]):,}"
                    return (f"{who} wrote {what} ({_listed(flat)}), run alone on fresh memory: {rule} ({own}).",
                            f"store only this thread's own {one} ({own}); the other threads write theirs.")
            if unit["most"][0] > 1 and runner == "blk_kernel2d_shar" and per_unit > 1:
                count, t = unit["most"]
                return (f"one thread (number {t}) of {who} stored {count:,} {many} of one tensor, run alone: {rule}.",
                        f"let each thread store its own {one}; the other threads of the block store theirs.")
            if one_d and unit["error"] is None:
                for k, numel in launch["outputs"]:
                    if unit["at"] < numel and not any(w["arg"] == k for w in unit["wrote"]):
                        return (f"{who} wrote nothing, run alone on fresh memory, though {one} {unit['at']:,} is its "
                                f"own: {rule}, so another thread (or one call that does them all) wrote it.",
                                f"let every thread compute and store its own {one} (out[i] = ...).")
    return None


def check(exercise, launches, yours, what, where):
    """Raises AssertionError naming the rule when a call's threads, run alone, broke the one-thread contract."""
    found = broken(exercise, launches, tuple(yours.shape) if isinstance(yours, torch.Tensor) else ())
    if found is not None:
        happened, hint = found
        raise AssertionError(f"{what} gives the right output for {where}, but {happened}\nHint: {hint}")


# ---- the tiled kernel: what its source text shows, read where no student code runs ------------------------------

def _cells(text):
    """The module ASTs of an answer's text: one string, or a notebook's code cells (IPython's magics translated; a
    cell that does not parse left out)."""
    from IPython.core.inputtransformer2 import TransformerManager
    trees = []
    for source in ([text] if isinstance(text, str) else text):
        try:
            trees.append(ast.parse(TransformerManager().transform_cell(source)))
        except SyntaxError:
            continue
    return trees


def tiled_source(text, fn_name):
    """What the text says of the kernel that fn_name launches with blk_kernel2d_shar: {"kernel": its name, "stores":
    whether it stores into its shared memory (its fourth parameter, or a slice or view of it), "syncs": whether it
    calls its barrier (its fifth)}; None when the text holds no such function, launch or kernel (the last definition
    of a name counts, as in the notebook)."""
    functions = {node.name: node for tree in _cells(text) for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef)}
    launcher = functions.get(fn_name)
    launches = [node for node in ast.walk(launcher) if isinstance(node, ast.Call) and node.args
                and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == "blk_kernel2d_shar"
                and isinstance(node.args[0], ast.Name)] if launcher else []
    kernel = functions.get(launches[0].args[0].id) if launches else None
    if kernel is None or len(kernel.args.args) < 5:
        return None
    shared, sync = kernel.args.args[3].arg, kernel.args.args[4].arg
    aliases = {shared}

    def of_shared(node):  # shared, a slice of it, or a view of it (shared[:n], shared.view(2, n))
        while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return isinstance(node, ast.Name) and node.id in aliases

    for node in ast.walk(kernel):  # names bound to a part of shared memory, in tuple assignments too
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
            pairs += [(t, v) for t, v in pairs if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple)
                      for t, v in zip(t.elts, v.elts)]
            aliases |= {t.id for t, v in pairs if isinstance(t, ast.Name) and of_shared(v)}
    targets = [t for node in ast.walk(kernel) if isinstance(node, (ast.Assign, ast.AugAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
    stored = any(isinstance(t, ast.Subscript) and of_shared(t.value) for t in targets)
    synced = any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == sync
                 for node in ast.walk(kernel))
    return {"kernel": kernel.name, "stores": stored, "syncs": synced}

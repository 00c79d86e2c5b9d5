"""One pytest session for the tests and the notebooks (`make test`), on every core.

nbval without a GPU: every cell runs (CUDA in CPU mode) except those tagged `gpu`, which only make sense on a
GPU (timings, sanitizer output); each says why in its notebook. On a GPU host all run.

Scheduling (pytest-xdist, --dist loadgroup): a notebook's cells share one kernel, so they go to one worker as a
group; the slow groups start first, so that the two workers end together instead of one waiting for the other.
"""
from pathlib import Path

import pytest
import torch

from course.assignments import pipeline_groups

# the slowest groups first (each a shared fixture: the corpus, a class graded by the CLI, the nbgrader pipelines of
# the assignments in source/, those with the most notebooks to grade first, and the `course new` scaffold)
SLOW_FIRST = ("cli-grayscale", "corpus", *pipeline_groups(Path(__file__).parent), "scaffold", "build", "slurm")


def _group(item):
    marker = item.get_closest_marker("xdist_group")
    return (marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else None  # as xdist reads it


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    gpu = torch.cuda.is_available()
    skip = pytest.mark.skip(reason="needs a GPU: this cell is tagged `gpu` and PyTorch sees none")
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is None:
            continue
        item.add_marker(pytest.mark.xdist_group(f"nbval:{item.path.relative_to(config.rootpath)}"))
        if not gpu and "gpu" in cell.get("metadata", {}).get("tags", []):
            item.add_marker(skip)

    def rank(item):
        group = _group(item)
        if group in SLOW_FIRST:
            return SLOW_FIRST.index(group)
        return len(SLOW_FIRST) + (0 if group and group.startswith("nbval:") else 1)
    items.sort(key=rank)  # stable: each notebook's cells keep their order

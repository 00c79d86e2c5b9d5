"""nbval without a GPU: every cell runs (CUDA in CPU mode) except those tagged `gpu`, which only make
sense on a GPU (timings, sanitizer output); each says why in its notebook. On a GPU host all run."""
import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a GPU: this cell is tagged `gpu` and PyTorch sees none")
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None and "gpu" in cell.get("metadata", {}).get("tags", []):
            item.add_marker(skip)

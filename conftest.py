"""nbval on a machine without a GPU: cells tagged `gpu` are skipped there, and run everywhere else."""
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

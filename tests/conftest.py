"""Shared pytest set-up: a non-interactive plotting backend and the `gpu` marker."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``gpu`` on machines without CUDA, and say why."""
    if torch.cuda.is_available():
        return
    reason = "needs a CUDA GPU; this machine has none (torch.cuda.is_available() is False)"
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))

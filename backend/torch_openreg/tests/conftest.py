"""Shared fixtures of the torch_openreg tests."""
import pytest
import torch

import torch_openreg


@pytest.fixture
def dev():
    """The first openreg device, openreg:0."""
    return torch_openreg.device(0)

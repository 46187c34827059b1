"""Shared fixtures."""
import pytest


@pytest.fixture
def one_torch_thread():
    """Tiny models gain nothing from a second thread, and on a shared 2-core machine OpenMP's
    spin-waiting made the reward-model tests ~15x slower (250 s instead of 15 s). Restored
    afterwards."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

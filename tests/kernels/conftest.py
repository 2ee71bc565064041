"""Fixtures of the kernel suites (correctness `test_op*`, performance `test_perf`).

GPU tests skip with the reason on a machine without a CUDA GPU (CI); on a GPU host a missing
library or import failure is an error, never a skip.
"""

import pytest


@pytest.fixture
def cuda():
    import torch

    if not torch.cuda.is_available():
        pytest.skip(
            "no CUDA GPU here (torch.cuda.is_available() is False); kernel suites run on a GPU host, e.g. from `make bundle`"
        )
    return torch.device("cuda")

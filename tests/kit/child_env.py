"""The child processes a kit test starts (pytest, make, make's stage script, the tilekit CLI): their
environment -- the caller's, without the GPU selection and session a make stage exports, with
tools/ on PYTHONPATH -- and their deadline. Shared by test_gpu_workers.py and test_stage_logs.py.

Every child runs under ``run(...)``: in its own process group, killed with everything it started
(xdist workers included) after CHILD_TIMEOUT seconds, and the test then fails with what the child
printed so far. A test that starts several children gets TEST_TIMEOUT from pytest-timeout
(``pytestmark`` of those modules), well above one child's deadline, so a stuck child is reported
by its own deadline, with its output, and never hangs the suite.
"""

import os
import signal
import subprocess
from pathlib import Path

TOOLS = str(Path(__file__).resolve().parents[2] / "tools")
GPU_VARS = ("GPUS", "CUDA_VISIBLE_DEVICES", "TILEKIT_GPU_LIST", "PYTEST_XDIST_WORKER", "TILEKIT_SESSION_LOG")
CHILD_TIMEOUT = 120  # seconds; a child pytest here takes 1-10 s, a few times that on a busy machine
TEST_TIMEOUT = 600  # seconds, per test (pytest-timeout); no test here starts more than five children


def child_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in GPU_VARS}
    return {**env, "PYTHONPATH": TOOLS, **extra}


def run(argv, timeout: float = CHILD_TIMEOUT, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True, **kwargs) with a deadline that kills the
    child's whole process group and fails the test with the child's output."""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs
    ) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            raise AssertionError(
                f"{' '.join(map(str, argv))} did not finish in {timeout} s (killed with its "
                f"process group)\n--- stdout\n{out}\n--- stderr\n{err}"
            ) from None
    return subprocess.CompletedProcess(argv, child.returncode, out, err)

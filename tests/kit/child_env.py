"""The environment of a child process a kit test starts (pytest, make's stage script, the tilekit
CLI): the caller's, without the GPU selection and session a make stage exports, with tools/ on
PYTHONPATH. Shared by test_gpu_workers.py and test_stage_logs.py."""
import os
from pathlib import Path

TOOLS = str(Path(__file__).resolve().parents[2] / "tools")
GPU_VARS = ("GPUS", "CUDA_VISIBLE_DEVICES", "TILEKIT_GPU_LIST", "PYTEST_XDIST_WORKER", "TILEKIT_SESSION_LOG")


def child_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in GPU_VARS}
    return {**env, "PYTHONPATH": TOOLS, **extra}

#!/usr/bin/env bash
# scripts/pytest_stage.sh RAW_LOG -- PYTEST_ARGS...: run pytest, tee everything to RAW_LOG (kept
# whatever happens), and say how it ended. Exit 0 when the tests ran (passed, failed or skipped:
# the report's verdict speaks for them); pytest's own code for collection, usage or internal errors.
#
# GPUS (from make; empty = every visible GPU): with more than one GPU, the cases are spread over
# one pytest-xdist worker per GPU, each pinned with CUDA_VISIBLE_DEVICES (tools/tilekit/testing/gpu_workers.py,
# docs/multi-gpu.md), --dist load; with --stage-log (baseline, perf) the tilekit.testing.gpu_workers plugin
# hands them out by (kernel, backend) when that balances the GPUs (StageScheduling), else case by
# case. With one GPU, or GPUS=1, the command is the single-process one.
set -uo pipefail
log=${1:?usage: scripts/pytest_stage.sh RAW_LOG -- PYTEST_ARGS...}; shift
[ "${1:-}" = "--" ] && shift
mkdir -p "$(dirname "$log")"
py=${TILEKIT_PYTHON:-python3}
if [ "${GPUS:-}" != 1 ]; then
    # the GPUs to use, comma-separated; its notes and errors (a bad GPUS) go to stderr and,
    # when no pytest runs, stay in the raw log
    gpus=$("$py" -m tilekit.testing.gpu_workers 2>"$log"); status=$?
    cat "$log" >&2
    [ "$status" -eq 0 ] || exit 2
    IFS=, read -ra gpu_list <<<"$gpus"
    if [ "${#gpu_list[@]}" -gt 1 ]; then
        export TILEKIT_GPU_LIST=$gpus
        # --dist load: case by case, or by stage in a --stage-log session (tilekit.testing.gpu_workers)
        set -- -p xdist -n "${#gpu_list[@]}" --dist load "$@"
        echo "GPUS: one pytest-xdist worker per GPU, pinned to CUDA_VISIBLE_DEVICES $gpus" >&2
    fi
fi
echo "\$ python -m pytest $*" >&2
export TILEKIT_SESSION_LOG=$log  # named in the header of each stage log (tilekit.testing.stage_logs)
PYTHONUNBUFFERED=1 "$py" -m pytest "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
echo "pytest exit=$rc; raw log: $log" >&2
case $rc in
    0|1) exit 0 ;;
    5) echo "pytest collected no test for: $*" >&2; exit 5 ;;
    *) exit "$rc" ;;
esac

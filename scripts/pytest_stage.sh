#!/usr/bin/env bash
# scripts/pytest_stage.sh RAW_LOG -- PYTEST_ARGS...: run pytest, tee everything to RAW_LOG (kept
# whatever happens), and say how it ended. Exit 0 when the tests ran (passed, failed or skipped:
# the report's verdict speaks for them); pytest's own code for collection, usage or internal errors.
set -uo pipefail
log=${1:?usage: scripts/pytest_stage.sh RAW_LOG -- PYTEST_ARGS...}; shift
[ "${1:-}" = "--" ] && shift
mkdir -p "$(dirname "$log")"
echo "\$ python -m pytest $*" >&2
PYTHONUNBUFFERED=1 "${TILEKIT_PYTHON:-python3}" -m pytest "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
echo "pytest exit=$rc; raw log: $log" >&2
case $rc in
    0|1) exit 0 ;;
    5) echo "pytest collected no test for: $*" >&2; exit 5 ;;
    *) exit "$rc" ;;
esac

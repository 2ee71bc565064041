#!/usr/bin/env bash
# scripts/timed_stage.sh STAGE SESSION_LOG TEMPLATE [--force] -- SPEC...
#
# One timed stage of make (STAGE = baseline or perf): times the raw logs that are missing or older
# than what they were made from, and nothing else. Make calls it when at least one of them is out
# of date (the raw logs are the targets of one rule); this script works out which ones are, since
# make runs a rule's recipe once for all its targets.
#
#   SPEC       KERNEL,BACKEND_ID,RAW_LOG[,DEP...]   one raw log and its prerequisites, comma-separated
#              (BACKEND_ID is a test id: cutile_rs, cutile_py, triton, torch, tilegym, liger, ...)
#   TEMPLATE   the --stage-log template the raw logs follow (tilekit.testing.stage_logs)
#   --force    re-time every SPEC (make FORCE=1)
#
# Kernels whose stale backends are the same set share one pytest session (usually there is one
# set: every kernel of the call). SESSION_LOG gets pytest's whole output (SESSION_LOG with -2, -3
# before .txt for further sessions). A session that did not end normally (a collection, usage or
# internal error; killed) leaves its stage logs in place and names them in SESSION_LOG.failed, so
# that make can render what they hold, then mark them out of date and fail (the Makefile's
# stage_status). When this script itself is stopped (SIGTERM, SIGINT, SIGHUP: a deadline such as
# `timeout`, Ctrl-C), it stops its session, names the session's logs in SESSION_LOG.failed and
# dates them 1970 at once, so the next make re-times them; the Makefile marks the raw logs
# .PRECIOUS, so make keeps them instead of deleting what the session had written. Killed outright
# (SIGKILL: no trap runs), it leaves SESSION_LOG.running, the logs of the session it was in: a
# watchdog stops that session, and the next make (the Makefile re-runs the stage while the file
# exists) dates them 1970 and times them again.
# Exit status: 0 when every session ran (its cases may have failed or skipped: the reports say so).
set -uo pipefail
usage="usage: scripts/timed_stage.sh baseline|perf SESSION_LOG TEMPLATE [--force] -- KERNEL,BACKEND_ID,RAW_LOG[,DEP...]..."
stage=${1:?$usage} session=${2:?$usage} template=${3:?$usage}
shift 3
force=0
[ "${1:-}" = --force ] && { force=1; shift; }
[ "${1:-}" = -- ] && shift
case $stage in baseline|perf) ;; *) echo "$usage" >&2; exit 2 ;; esac

if [ -f "$session.running" ]; then  # left by a run killed outright: its logs may look complete and current
    while read -r f; do [ ! -f "$f" ] || touch -d @0 "$f"; done <"$session.running"
    echo "$stage: $session.running: a run killed during its session left these raw logs; timing them again" >&2
    rm -f "$session.running"
fi

declare -A stale_backends  # kernel -> its stale backend ids, comma-separated, in SPEC order
declare -A stale_logs      # kernel -> its stale raw logs, space-separated
kernels=()
for spec in "$@"; do
    IFS=, read -ra field <<<"$spec"
    kernel=${field[0]} backend=${field[1]} log=${field[2]}
    deps=("${field[@]:3}")
    why=
    if [ "$force" = 1 ]; then why="FORCE=1"
    elif [ ! -e "$log" ]; then why="missing"
    elif [ "${#deps[@]}" -gt 0 ]; then
        newer=$(find "${deps[@]}" -newer "$log" -print -quit 2>/dev/null)
        [ -n "$newer" ] && why="older than $newer"
    fi
    [ -n "$why" ] || { echo "$stage: $log is up to date" >&2; continue; }
    echo "$stage: timing $kernel/$backend: $log $why" >&2
    [ -n "${stale_backends[$kernel]+set}" ] || kernels+=("$kernel")
    stale_backends[$kernel]="${stale_backends[$kernel]:+${stale_backends[$kernel]},}$backend"
    stale_logs[$kernel]="${stale_logs[$kernel]:-} $log"
done
[ "${#kernels[@]}" -gt 0 ] || { echo "$stage: every raw log is up to date (FORCE=1 re-times them)" >&2; exit 0; }

# Kernels grouped by their set of stale backends: one session per set.
sets=()
for kernel in "${kernels[@]}"; do
    set_=${stale_backends[$kernel]}
    case " ${sets[*]} " in *" $set_ "*) ;; *) sets+=("$set_") ;; esac
done

rm -f "$session.failed"
n=0 status=0 child= logs=() log=
interrupted() {  # $1: the signal's name and number
    if [ -n "$child" ]; then  # the session's process group (pytest and tee too), and its leader
        kill -TERM -- "-$child" "$child" 2>/dev/null
        wait "$child" 2>/dev/null
        # until the group's last writer is gone (10 s at most), so that no write follows the dating
        for _ in $(seq 100); do kill -0 -- "-$child" 2>/dev/null || break; sleep 0.1; done
    fi
    { echo "# $log: stopped by SIG$1 (the raw logs keep what was timed; dated 1970: the next make re-times them)"
      printf '%s\n' "${logs[@]}"; } >>"$session.failed"
    for f in "${logs[@]}"; do [ ! -f "$f" ] || touch -d @0 "$f"; done
    rm -f "$session.running"
    echo "$stage: stopped by SIG$1 during $log; its raw logs are kept and will be re-timed by the next make" >&2
    exit $((128 + $2))
}
trap 'interrupted TERM 15' TERM
trap 'interrupted INT 2' INT
trap 'interrupted HUP 1' HUP
for set_ in "${sets[@]}"; do
    n=$((n + 1))
    log=$session
    [ "$n" -gt 1 ] && log="${session%.txt}-$n.txt"
    files=() logs=()
    for kernel in "${kernels[@]}"; do
        [ "${stale_backends[$kernel]}" = "$set_" ] || continue
        files+=("tests/kernels/test_$kernel.py")
        read -ra more <<<"${stale_logs[$kernel]}"
        logs+=("${more[@]}")
    done
    rm -f "${logs[@]}"  # a session that never starts must not leave an earlier run's log to report
    if [ "$stage" = perf ]; then
        select="cutile_rs and test_perf"
    else
        # "[id-": the whole id at the start of the case's parameters (-k matches substrings, and
        # liger would also select liger_cutile's cases)
        select="test_perf and ([${set_//,/- or [}-)"
    fi
    mkdir -p "$(dirname "$session")" && printf '%s\n' "${logs[@]}" >"$session.running"
    # in the background so that a signal reaches the trap at once (bash runs a trap only after its
    # foreground child ends), in a process group of its own that the trap can stop whole, with a
    # watchdog in it that stops the group if this script dies without its trap (SIGKILL)
    setsid scripts/with_watchdog.sh "$$" \
        scripts/pytest_stage.sh "$log" -- "${files[@]}" -k "$select" --print-record -v -rs --timeout=600 \
        --continue-on-collection-errors --stage-log "$template" --stage-backends "$set_" &
    child=$!
    wait "$child"
    rc=$? child=
    rm -f "$session.running"
    if [ "$rc" -ne 0 ]; then
        echo "$stage: the pytest session ended with exit $rc (see $log); its stage logs will be re-timed by the next make" >&2
        { echo "# $log: pytest exit $rc"; printf '%s\n' "${logs[@]}"; } >>"$session.failed"
        status=$rc
    fi
    logs=()  # timed: a signal from here on re-dates nothing of this session
done
[ "$status" -eq 0 ] || echo "$stage: $session.failed lists the raw logs of sessions that did not end normally" >&2
exit 0

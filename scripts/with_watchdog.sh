#!/usr/bin/env bash
# scripts/with_watchdog.sh PARENT_PID COMMAND...: run COMMAND in the process group this script leads
# (start it with setsid), forward SIGTERM, SIGINT and SIGHUP to it, and stop the whole group if
# PARENT_PID dies first (killed outright, so no trap of its ran). Exit: COMMAND's status.
# scripts/timed_stage.sh runs each pytest session so: its trap stops the group on a signal, and
# this watchdog when it is killed with SIGKILL, so no session outlives the stage that started it.
parent=${1:?usage: scripts/with_watchdog.sh PARENT_PID COMMAND...}
shift
"$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM INT HUP
# PARENT_PID is gone when this script's parent is no longer it (a killed parent is unparented from its
# children at once; kill -0 would still reach it until its own parent reaps it)
(
    while [ "$(cut -d ' ' -f 4 "/proc/$$/stat" 2>/dev/null)" = "$parent" ] && kill -0 "$pid" 2>/dev/null; do
        sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then kill -TERM 0; fi
) &
watchdog=$!
wait "$pid"
rc=$?
while kill -0 "$pid" 2>/dev/null; do  # a trapped signal ended the wait: wait for COMMAND itself
    wait "$pid"
    rc=$?
done
kill "$watchdog" 2>/dev/null
exit "$rc"

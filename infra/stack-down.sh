#!/usr/bin/env bash
# Stops the stack started by infra/stack-up.sh (same STACK_DIR), by the PIDs
# recorded in $STACK_DIR/*.pid. Idempotent: a missing or dead PID is fine, and
# a PID now used by an unrelated process (stale file) is left alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_DIR="${STACK_DIR:-$ROOT/.stack}"

# running PID: alive and not a zombie waiting to be reaped.
running() {
  local state
  kill -0 "$1" 2>/dev/null || return 1
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)"
  [ "$state" != "Z" ] && [ "$state" != "X" ]
}

# stop NAME PATTERN: PATTERN must appear in the process's command line.
stop() {
  local name=$1 pattern=$2 pidfile="$STACK_DIR/$1.pid" pid i
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if [[ "$pid" =~ ^[0-9]+$ ]] && running "$pid"; then
    if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern"; then
      echo "stack-down: pid $pid in $pidfile is not $name any more; leaving it alone" >&2
      rm -f "$pidfile"
      return 0
    fi
    # stack-up starts each server with setsid, so its PID is its process group.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "stack-down: stopped $name (pid $pid)"
  fi
  rm -f "$pidfile"
}

stop versitygw versitygw
stop moto moto
rm -f "$STACK_DIR/env"

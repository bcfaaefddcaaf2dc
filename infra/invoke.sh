#!/usr/bin/env bash
# Runs one tablekeep function under aws-lambda-rie against the local stack,
# as its own role (the versitygw account infra/aws-resources.sh made for it),
# and either posts one event or drains the cleanup queue into it.
#
#   make stack-up aws-resources
#   make invoke FN=compactor EVENT=events/scheduled.json   # = infra/invoke.sh compactor events/scheduled.json
#   make drain                                             # = infra/invoke.sh cleaner --drain
#
# The response is printed; the exit status is 1 if the function failed
# (errorMessage). The function's own output goes to $STACK_DIR/invoke-FN.log.
# CLOCK_OFFSET=2h passes the TEST-ONLY clock offset (grace windows "passed").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_DIR="${STACK_DIR:-$ROOT/.stack}"
die() { echo "invoke: $*" >&2; exit 1; }

FN="${1:-}"; ARG="${2:-}"
case "$FN" in
  compactor) TIMEOUT=600 ;;
  cleaner) TIMEOUT=90 ;;
  sweeper) TIMEOUT=900 ;;
  *) die "usage: infra/invoke.sh compactor|cleaner|sweeper EVENT.json | cleaner --drain" ;;
esac
[ -n "$ARG" ] || die "no event: infra/invoke.sh $FN events/<file>.json"
if [ "$ARG" = "--drain" ]; then
  [ "$FN" = cleaner ] || die "--drain feeds the cleanup queue to the cleaner only"
else
  [ -f "$ARG" ] || die "event file $ARG not found (see events/)"
fi
[ -f "$STACK_DIR/env" ] || die "no $STACK_DIR/env: make stack-up"
[ -f "$STACK_DIR/aws-env" ] || die "no $STACK_DIR/aws-env: make aws-resources"
# shellcheck disable=SC1091
. "$STACK_DIR/env"
# shellcheck disable=SC1091
. "$STACK_DIR/aws-env"
ROLE="$(tr '[:lower:]' '[:upper:]' <<<"$FN")"
ak="TABLEKEEP_${ROLE}_ACCESS_KEY"; sk="TABLEKEEP_${ROLE}_SECRET_KEY"
[ -n "${!ak:-}" ] || die "no $ak in $STACK_DIR/aws-env: rerun make aws-resources"

RIE="$(command -v aws-lambda-rie || echo "$(go env GOPATH)/bin/aws-lambda-rie")"
[ -x "$RIE" ] || die "aws-lambda-rie not found: make tools"
BIN="$ROOT/bin/lambda"
mkdir -p "$BIN"
(cd "$ROOT" && CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -buildvcs=false -o "$BIN/bootstrap" ./functions/tablekeep) || die "build failed"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
API="$(free_port)"; RAPID="$(free_port)"
EXTRA=()
if [ -n "${CLOCK_OFFSET:-}" ]; then EXTRA=(TABLEKEEP_CLOCK_OFFSET="$CLOCK_OFFSET" TABLEKEEP_ALLOW_CLOCK_OFFSET=test); fi
LOG="$STACK_DIR/invoke-$FN.log"
(cd "$BIN" && exec env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL \
  AWS_ACCESS_KEY_ID="${!ak}" AWS_SECRET_ACCESS_KEY="${!sk}" AWS_REGION="$AWS_REGION" \
  AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_LAMBDA_FUNCTION_TIMEOUT="$TIMEOUT" \
  TABLEKEEP_FUNCTION="$FN" TABLEKEEP_LEASE=15m "${EXTRA[@]}" \
  setsid "$RIE" --runtime-interface-emulator-address "127.0.0.1:$API" --runtime-api-address "127.0.0.1:$RAPID" ./bootstrap) \
  >"$LOG" 2>&1 &
PID=$!
trap 'kill -- "-$PID" 2>/dev/null || kill "$PID" 2>/dev/null || true' EXIT
URL="http://127.0.0.1:$API/2015-03-31/functions/function/invocations"
for _ in $(seq 1 300); do  # up to 30 s on a loaded machine
  curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$API/" && break
  kill -0 "$PID" 2>/dev/null || die "aws-lambda-rie exited; see $LOG"
  sleep 0.1
done
curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$API/" || die "aws-lambda-rie did not start in 30 s; see $LOG"

if [ "$ARG" = "--drain" ]; then
  (cd "$ROOT" && go run ./infra/drain -invoke "$URL" -queue "$TABLEKEEP_QUEUE_URL" -endpoint "$TABLEKEEP_AWS_ENDPOINT")
  echo "invoke: cleaner output in $LOG" >&2
  exit 0
fi
OUT="$(curl -s --max-time 960 -XPOST "$URL" -d @"$ARG")"
echo "$OUT"
echo "invoke: $FN output in $LOG" >&2
if grep -q '"errorMessage"' <<<"$OUT"; then exit 1; fi

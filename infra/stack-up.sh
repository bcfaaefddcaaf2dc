#!/usr/bin/env bash
# Starts the local test stack: versitygw (S3, posix backend) and moto_server
# (DynamoDB, SQS), each on a free loopback port, and writes $STACK_DIR/env.
#
# versitygw enforces IAM: it runs with its internal IAM accounts
# ($STACK_DIR/versitygw-iam) and an admin API (TABLEKEEP_S3_ADMIN_ENDPOINT,
# for `versitygw admin create-user`). The root
# credentials in env bypass policies; accounts created with role "user" may
# only do what a bucket policy grants them (infra/aws-resources.sh creates one
# per function role, with the policy generated from template.yaml).
#
#   infra/stack-up.sh            # stack in .stack/
#   STACK_DIR=/tmp/x infra/stack-up.sh
#   source .stack/env            # TABLEKEEP_S3_ENDPOINT, TABLEKEEP_AWS_ENDPOINT, creds
#
# Stop it with infra/stack-down.sh (same STACK_DIR). Logs: $STACK_DIR/*.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_DIR="${STACK_DIR:-$ROOT/.stack}"
ACCESS_KEY="${TABLEKEEP_TEST_ACCESS_KEY:-tablekeeptest}"
SECRET_KEY="${TABLEKEEP_TEST_SECRET_KEY:-tablekeeptestsecret}"
REGION=us-east-1
BUCKET=tablekeep-test

die() { echo "stack-up: $*" >&2; exit 1; }

# --- locate tools ----------------------------------------------------------
GOBIN_DIR="$(go env GOBIN 2>/dev/null || true)"
[ -n "$GOBIN_DIR" ] || GOBIN_DIR="$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"
VERSITYGW="$(command -v versitygw || true)"
[ -n "$VERSITYGW" ] || { [ -x "$GOBIN_DIR/versitygw" ] && VERSITYGW="$GOBIN_DIR/versitygw"; } || true
[ -n "$VERSITYGW" ] || die "versitygw not found on PATH or in $GOBIN_DIR: run 'make tools' to install it"
MOTO="$(command -v moto_server || true)"
[ -n "$MOTO" ] || die "moto_server not found: pip install 'moto[server]'"
command -v aws >/dev/null || die "aws CLI not found: pip install awscli"
command -v curl >/dev/null || die "curl not found"
command -v python3 >/dev/null || die "python3 not found"

mkdir -p "$STACK_DIR"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if alive "$STACK_DIR/versitygw.pid" && alive "$STACK_DIR/moto.pid" && [ -f "$STACK_DIR/env" ]; then
  echo "stack-up: already running (STACK_DIR=$STACK_DIR); env in $STACK_DIR/env"
  exit 0
fi
# Partial or stale stack: clear it first.
STACK_DIR="$STACK_DIR" "$ROOT/infra/stack-down.sh" >/dev/null

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_http URL PID: succeeds once URL answers any HTTP status, fails if PID dies or 20 s pass.
wait_http() {
  local url=$1 pid=$2 i
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 1
    if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true)" != "000" ]; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}

# start NAME CMD...: runs CMD with "PORT" replaced by a free port in its own
# session (so stack-down can kill its whole process group), retrying with a new
# port if the server dies (port taken in the meantime). Sets $PORT.
start() {
  local name=$1; shift
  local attempt pid args a
  for attempt in 1 2 3 4 5; do
    PORT="$(free_port)"
    args=()
    for a in "$@"; do args+=("${a//PORT/$PORT}"); done
    setsid "${args[@]}" >>"$STACK_DIR/$name.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$STACK_DIR/$name.pid"
    if wait_http "http://127.0.0.1:$PORT/" "$pid"; then
      echo "stack-up: $name pid $pid on 127.0.0.1:$PORT (log $STACK_DIR/$name.log)"
      return 0
    fi
    echo "stack-up: $name did not come up on port $PORT (attempt $attempt), see $STACK_DIR/$name.log" >&2
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$STACK_DIR/$name.pid"
  done
  return 1
}

mkdir -p "$STACK_DIR/versitygw-data" "$STACK_DIR/versitygw-iam"
ADMIN_PORT="$(free_port)"
if ! start versitygw env ROOT_ACCESS_KEY="$ACCESS_KEY" ROOT_SECRET_KEY="$SECRET_KEY" \
    "$VERSITYGW" --port 127.0.0.1:PORT --admin-port "127.0.0.1:$ADMIN_PORT" --region "$REGION" --quiet \
    --iam-dir "$STACK_DIR/versitygw-iam" \
    posix "$STACK_DIR/versitygw-data"; then
  die "versitygw failed to start; tail of $STACK_DIR/versitygw.log:
$(tail -n 20 "$STACK_DIR/versitygw.log" 2>/dev/null)"
fi
S3_PORT=$PORT

# moto's own launcher lets two conditional DynamoDB writes race; ours
# serialises requests (see infra/moto_atomic.py) and falls back to moto_server.
MOTO_CMD=("$MOTO")
if python3 -c 'import moto.moto_server.werkzeug_app, werkzeug' 2>/dev/null; then
  MOTO_CMD=(python3 "$ROOT/infra/moto_atomic.py")
fi
if ! start moto env -u AWS_ENDPOINT_URL "${MOTO_CMD[@]}" -H 127.0.0.1 -p PORT; then
  STACK_DIR="$STACK_DIR" "$ROOT/infra/stack-down.sh" >/dev/null
  die "moto_server failed to start; tail of $STACK_DIR/moto.log:
$(tail -n 20 "$STACK_DIR/moto.log" 2>/dev/null)"
fi
AWS_PORT=$PORT

cat >"$STACK_DIR/env" <<ENV
export TABLEKEEP_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
export TABLEKEEP_AWS_ENDPOINT=http://127.0.0.1:$AWS_PORT
export TABLEKEEP_S3_BUCKET=$BUCKET
export TABLEKEEP_S3_ADMIN_ENDPOINT=http://127.0.0.1:$ADMIN_PORT
export AWS_ACCESS_KEY_ID=$ACCESS_KEY AWS_SECRET_ACCESS_KEY=$SECRET_KEY AWS_REGION=$REGION
ENV

# Default bucket on versitygw. Isolate the CLI from any user config/profile.
if ! env -u AWS_PROFILE -u AWS_DEFAULT_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL \
    AWS_ACCESS_KEY_ID="$ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$SECRET_KEY" AWS_REGION="$REGION" \
    AWS_DEFAULT_REGION="$REGION" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
    AWS_EC2_METADATA_DISABLED=true \
    aws --endpoint-url "http://127.0.0.1:$S3_PORT" s3api create-bucket --bucket "$BUCKET" \
    >"$STACK_DIR/aws-cli.log" 2>&1; then
  if ! grep -q 'BucketAlreadyOwnedByYou' "$STACK_DIR/aws-cli.log"; then
    STACK_DIR="$STACK_DIR" "$ROOT/infra/stack-down.sh" >/dev/null
    die "could not create bucket $BUCKET; see $STACK_DIR/aws-cli.log"
  fi
fi

echo "stack-up: ready; run: source $STACK_DIR/env"

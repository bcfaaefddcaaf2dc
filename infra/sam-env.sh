#!/usr/bin/env bash
# Writes $STACK_DIR/sam-env.json, the env file for
#   sam local invoke CompactorFunction -e events/scheduled.json \
#     --env-vars .stack/sam-env.json --docker-network host
# from the running local stack ($STACK_DIR/env, $STACK_DIR/aws-env from
# make stack-up aws-resources). sam local only passes variables the template
# declares: every one written here is (TestSAMEnvFileDeclared checks it),
# and TABLEKEEP_LOCAL_* point each function at the local stack with its own
# role's local keys, so nothing reaches real AWS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_DIR="${STACK_DIR:-$ROOT/.stack}"
die() { echo "sam-env: $*" >&2; exit 1; }
[ -f "$STACK_DIR/env" ] || die "no $STACK_DIR/env: make stack-up"
[ -f "$STACK_DIR/aws-env" ] || die "no $STACK_DIR/aws-env: make aws-resources"
# shellcheck disable=SC1091
. "$STACK_DIR/env"
# shellcheck disable=SC1091
. "$STACK_DIR/aws-env"
python3 - "$STACK_DIR/sam-env.json" <<'PY'
import json, os, sys
e = os.environ
def fn(role, extra):
    up = role.upper()
    v = {
        "TABLEKEEP_WAREHOUSE": e["TABLEKEEP_WAREHOUSE"],
        "TABLEKEEP_STACK": "tablekeep-local",
        "TABLEKEEP_LOCAL_S3_ENDPOINT": e["TABLEKEEP_S3_ENDPOINT"],
        "TABLEKEEP_LOCAL_AWS_ENDPOINT": e["TABLEKEEP_AWS_ENDPOINT"],
        "TABLEKEEP_LOCAL_ACCESS_KEY_ID": e["TABLEKEEP_%s_ACCESS_KEY" % up],
        "TABLEKEEP_LOCAL_SECRET_ACCESS_KEY": e["TABLEKEEP_%s_SECRET_KEY" % up],
    }
    v.update(extra)
    return v
# Every variable whose template value sam local cannot resolve (a !Ref of a
# resource is its logical ID locally, e.g. "CompactionQueue"; a !Sub or
# pseudo parameter is not what AWS passes) is set here: TestMakeInvokeAndDrain
# builds the environment as sam does (template values, then this file).
# TABLEKEEP_COMPACTION_QUEUE_URL is empty: make aws-resources makes no
# compaction queue, so the compactor maintains every table itself (no fan-out).
out = {
    "CompactorFunction": fn("compactor", {"TABLEKEEP_LOCK_TABLE": e["TABLEKEEP_LOCK_TABLE"], "TABLEKEEP_QUEUE_URL": e["TABLEKEEP_QUEUE_URL"],
                                          "TABLEKEEP_COMPACTION_QUEUE_URL": e.get("TABLEKEEP_COMPACTION_QUEUE_URL", ""),
                                          # No manifest notifications locally: every pass lists every table.
                                          "TABLEKEEP_SAFETY_SCAN_EVERY": "0"}),
    "CleanerFunction": fn("cleaner", {"TABLEKEEP_QUEUE_URL": e["TABLEKEEP_QUEUE_URL"]}),
    "SweeperFunction": fn("sweeper", {}),
}
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=2)
    f.write("\n")
PY
echo "sam-env: wrote $STACK_DIR/sam-env.json; sam local invoke CompactorFunction -e events/scheduled.json --env-vars $STACK_DIR/sam-env.json --docker-network host"

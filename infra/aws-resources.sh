#!/usr/bin/env bash
# Creates what the Lambda functions need on the running local stack (see
# stack-up.sh): the warehouse bucket (versitygw), the DynamoDB lock table with
# TTL on `ttl`, and the cleanup queue with its DLQ (redrive after 5 receives)
# on moto_server. Idempotent. Writes $STACK_DIR/aws-env with the functions'
# environment (TABLEKEEP_WAREHOUSE, TABLEKEEP_LOCK_TABLE, TABLEKEEP_QUEUE_URL,
# TABLEKEEP_DLQ_URL, AWS_ENDPOINT_URL_S3/_DYNAMODB/_SQS, and per function role
# TABLEKEEP_<ROLE>_ACCESS_KEY/_SECRET_KEY of its versitygw IAM account, which
# the bucket policy generated from template.yaml limits to the role's grants).
#
#   STACK_DIR=/tmp/s infra/stack-up.sh && STACK_DIR=/tmp/s infra/aws-resources.sh
#   source /tmp/s/env; source /tmp/s/aws-env
#
# Names: TABLEKEEP_LOCAL_BUCKET (tablekeep-warehouse), TABLEKEEP_LOCAL_PREFIX
# (warehouse), TABLEKEEP_LOCAL_NAME (tablekeep: tablekeep-locks, tablekeep-cleanup).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_DIR="${STACK_DIR:-$ROOT/.stack}"
die() { echo "aws-resources: $*" >&2; exit 1; }
[ -f "$STACK_DIR/env" ] || die "no $STACK_DIR/env: start the stack first (make stack-up, or STACK_DIR=... infra/stack-up.sh)"
# shellcheck disable=SC1091
. "$STACK_DIR/env"
command -v aws >/dev/null || die "aws CLI not found: pip install awscli"

BUCKET="${TABLEKEEP_LOCAL_BUCKET:-tablekeep-warehouse}"
PREFIX="${TABLEKEEP_LOCAL_PREFIX:-warehouse}"
NAME="${TABLEKEEP_LOCAL_NAME:-tablekeep}"
LOCKS="$NAME-locks"
QUEUE="$NAME-cleanup"
LOG="$STACK_DIR/aws-resources.log"
: >"$LOG"

awsl() { # aws CLI isolated from any user profile
  env -u AWS_PROFILE -u AWS_DEFAULT_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL \
    AWS_DEFAULT_REGION="$AWS_REGION" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
    AWS_EC2_METADATA_DISABLED=true aws --output text "$@" 2>>"$LOG"
}

if ! awsl --endpoint-url "$TABLEKEEP_S3_ENDPOINT" s3api create-bucket --bucket "$BUCKET" >/dev/null; then
  grep -q BucketAlreadyOwnedByYou "$LOG" || die "create bucket $BUCKET failed; see $LOG"
fi
if ! awsl --endpoint-url "$TABLEKEEP_AWS_ENDPOINT" dynamodb describe-table --table-name "$LOCKS" >/dev/null; then
  awsl --endpoint-url "$TABLEKEEP_AWS_ENDPOINT" dynamodb create-table --table-name "$LOCKS" \
    --attribute-definitions AttributeName=name,AttributeType=S --key-schema AttributeName=name,KeyType=HASH \
    --billing-mode PAY_PER_REQUEST >/dev/null || die "create table $LOCKS failed; see $LOG"
  awsl --endpoint-url "$TABLEKEEP_AWS_ENDPOINT" dynamodb update-time-to-live --table-name "$LOCKS" \
    --time-to-live-specification Enabled=true,AttributeName=ttl >/dev/null || die "TTL on $LOCKS failed; see $LOG"
fi
DLQ_URL="$(awsl --endpoint-url "$TABLEKEEP_AWS_ENDPOINT" sqs create-queue --queue-name "$QUEUE-dlq" \
  --attributes MessageRetentionPeriod=1209600 --query QueueUrl)" || die "create queue $QUEUE-dlq failed; see $LOG"
DLQ_ARN="$(awsl --endpoint-url "$TABLEKEEP_AWS_ENDPOINT" sqs get-queue-attributes --queue-url "$DLQ_URL" \
  --attribute-names QueueArn --query Attributes.QueueArn)" || die "DLQ ARN failed; see $LOG"
ATTRS="$(python3 -c 'import json,sys; print(json.dumps({"VisibilityTimeout":"60","RedrivePolicy":json.dumps({"deadLetterTargetArn":sys.argv[1],"maxReceiveCount":"5"})}))' "$DLQ_ARN")"
QUEUE_URL="$(awsl --endpoint-url "$TABLEKEEP_AWS_ENDPOINT" sqs create-queue --queue-name "$QUEUE" \
  --attributes "$ATTRS" --query QueueUrl)" || die "create queue $QUEUE failed; see $LOG"

# One versitygw IAM account per function role, and the bucket policy
# generated from template.yaml granting each exactly its role's S3
# statements (go run ./infra/bucketpolicy): run a function with
# TABLEKEEP_<ROLE>_ACCESS_KEY / _SECRET_KEY as its AWS keys and versitygw
# enforces what AWS would (docs/aws.md "Least privilege, enforced locally").
[ -n "${TABLEKEEP_S3_ADMIN_ENDPOINT:-}" ] || die "no TABLEKEEP_S3_ADMIN_ENDPOINT in $STACK_DIR/env: restart the stack (infra/stack-down.sh; infra/stack-up.sh)"
VERSITYGW="$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")"
POLICY_ARGS=()
ROLE_ENV=""
for role in compactor cleaner sweeper; do
  access="$NAME-$role"; secret="$NAME-$role-local-secret"
  if ! out="$("$VERSITYGW" admin --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
      --endpoint-url "$TABLEKEEP_S3_ADMIN_ENDPOINT" create-user --access "$access" --secret "$secret" --role user 2>&1)"; then
    grep -qi "exists" <<<"$out" || die "create IAM account $access: $out"
  fi
  POLICY_ARGS+=(-principal "$role=$access")
  ROLE_ENV+="export TABLEKEEP_${role^^}_ACCESS_KEY=$access TABLEKEEP_${role^^}_SECRET_KEY=$secret"$'\n'
done
(cd "$ROOT" && go run ./infra/bucketpolicy -template template.yaml -bucket "$BUCKET" -prefix "$PREFIX" "${POLICY_ARGS[@]}") \
  >"$STACK_DIR/bucket-policy.json" 2>>"$LOG" || die "bucket policy generation failed; see $LOG"
awsl --endpoint-url "$TABLEKEEP_S3_ENDPOINT" s3api put-bucket-policy --bucket "$BUCKET" \
  --policy "file://$STACK_DIR/bucket-policy.json" >/dev/null || die "put-bucket-policy on $BUCKET failed; see $LOG"

cat >"$STACK_DIR/aws-env" <<ENV
export TABLEKEEP_WAREHOUSE=s3://$BUCKET/$PREFIX
export TABLEKEEP_LOCK_TABLE=$LOCKS
export TABLEKEEP_QUEUE_URL=$QUEUE_URL
export TABLEKEEP_DLQ_URL=$DLQ_URL
export AWS_ENDPOINT_URL_S3=$TABLEKEEP_S3_ENDPOINT
export AWS_ENDPOINT_URL_DYNAMODB=$TABLEKEEP_AWS_ENDPOINT
export AWS_ENDPOINT_URL_SQS=$TABLEKEEP_AWS_ENDPOINT
${ROLE_ENV%$'\n'}
ENV
echo "aws-resources: bucket $BUCKET, lock table $LOCKS, queue $QUEUE_URL (DLQ $DLQ_URL); run: source $STACK_DIR/aws-env"

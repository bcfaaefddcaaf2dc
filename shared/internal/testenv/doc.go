// Package testenv connects tests to the local stack started by
// infra/stack-up.sh (versitygw for S3, moto_server for DynamoDB and SQS).
//
// Tests that need the stack fail, never skip, when it is not running: run
// them with `make test`, or `make stack-up && source .stack/env` first.
//
// Floor 2 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). For tests only: the
// stack's endpoints and buckets, and the failure message that says how to
// start the stack. It must not import: shared/table, shared/maintenance,
// shared/lock, shared/queue.
package testenv

// Package testkit holds the helpers that tests of several packages share,
// written once instead of copied into each package's *_test.go: a disk
// store in a temporary directory, an in-memory store, DynamoDB and SQS clients for the local
// moto_server built as the functions build theirs, a queue's depth.
//
// Floor 3 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the shared
// helpers only; a helper used by one package's tests stays in that package.
// No non-test code imports it. It imports objstore, the AWS SDK,
// shared/internal/awshttp and shared/internal/testenv (a helper that needs
// the stack fails, never skips, without it), and nothing whose own internal
// tests use it, so that table, lock, queue and catalog tests can. It must
// not import: shared/table, shared/lock, shared/queue, shared/maintenance,
// shared/catalog.
package testkit

// Package testkit holds the helpers that tests of several packages share,
// written once instead of copied into each package's *_test.go: a disk
// store in a temporary directory, DynamoDB and SQS clients for the local
// moto_server built as the functions build theirs, a queue's depth.
//
// Floor: internal, for tests only. It imports objstore, the AWS SDK and
// shared/internal/testenv (which finds the local stack; a helper that needs
// the stack fails, never skips, without it). No non-test code imports it,
// and it must import no package whose tests use it other than objstore
// (objstore's own tests cannot use it).
package testkit

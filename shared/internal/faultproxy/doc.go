// Package faultproxy is a fault-injecting HTTP reverse proxy for tests: it
// listens on a free loopback port, forwards every request to a real S3
// endpoint (versitygw in the local stack) and, by rule, answers some
// requests itself with the failures S3 produces in production: 500
// InternalError, 503 SlowDown, timeouts (the connection is held, then
// dropped), connection resets, and 412 PreconditionFailed or 409
// ConditionalRequestConflict on conditional PUTs.
//
// A fault either replaces the request (the server never sees it) or, with
// Rule.After, follows it: the request is applied by the server and its
// response is lost. The latter is what makes a commit's outcome unknown.
//
// Rules fire by probability (Prob, drawn from a generator seeded by Seed)
// or on every Nth matching request (Every), so a run is reproducible up to
// the interleaving of concurrent requests. A rule also fires on the
// matching requests listed in Nth, whatever Prob draws: a test that checks
// that every kind of fault was injected sets Nth instead of relying on
// chance (or on a long run). SigV4 signatures stay valid: the Host header
// is passed through unchanged.
//
// Options.Latency delays every S3 request by its kind's latency (an
// objstore.Profile: GET, HEAD, PUT, LIST, DeleteObjects) before forwarding
// or faulting it, so that code talking to the proxy over real HTTP (Lambda
// functions under aws-lambda-rie) pays S3's round trips. AWS JSON protocol
// requests (DynamoDB, SQS) are not delayed.
//
// Floor 2 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). For tests only; no
// non-test code imports it. It must not import: shared/table,
// shared/maintenance, shared/awsfn.
package faultproxy

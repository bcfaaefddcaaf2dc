// Package awsfn is the AWS Lambda shell around tablekeep's maintenance: the
// compactor (scheduled: lock, compact, plan prune, enqueue, refresh stats),
// the cleaner (SQS: drain prune ranges with no lock) and the sweeper
// (scheduled: orphan sweep). functions/tablekeep is the one thin main over
// this package (TABLEKEEP_FUNCTION picks the role).
//
// Configuration comes from environment variables, validated at cold start
// (see LoadConfig). AWS endpoints follow the SDK's standard variables
// (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS, or
// AWS_ENDPOINT_URL), so the same binaries run against local servers.
//
// Floor 7 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the Lambda side
// only: the environment configuration and its validation (config.go), event
// parsing and the queue check (event.go, notify.go), the three handlers and
// their JSON summaries (compactor.go, cleaner.go, sweeper.go),
// BatchItemFailures, per-invocation metrics (metrics.go; names in
// shared/telemetry), the bucket checks at cold start and the crash hooks the
// kill tests use, the Lambda deadline plumbing, and the job sender
// (SQSJobSender, a fleet.JobSender). The fan-out's policy (the
// inline-or-queued choice, table jobs, follow-ups, retry markers, inline run
// records) is shared/fleet's (fleet.Fanout), as are the fleet passes
// (fleet.Scheduler); fanout_run.go maps the fan-out's outcomes to the
// summary, the metrics and BatchItemFailures. The clients and the wiring
// are shared/warehouse's (OpenAWS and its constructors), the maintenance
// verbs shared/maintenance's. It must not import:
// shared/cli, shared/embedded, shared/iampolicy, shared/lance, shared/bench,
// shared/internal/testkit.
package awsfn

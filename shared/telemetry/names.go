package telemetry

// Every metric name tablekeep records is a constant here, and nowhere else
// a string literal (TestMetricNamesDefinedOnce scans the source).
// template.yaml's alarms on namespace tablekeep name some of them
// (TestTemplateAlarmsNameKnownMetrics).

// Metric names recorded by the maintenance components.
const (
	VersionsPruned      = "VersionsPruned"      // manifests deleted by cleaners
	ObjectsDeleted      = "ObjectsDeleted"      // keys deleted (cleaner + sweep)
	BytesDeleted        = "BytesDeleted"        // bytes of those keys, where known
	CompactionRows      = "CompactionRows"      // rows rewritten by compaction
	CompactionBytes     = "CompactionBytes"     // bytes written by compaction
	CompactionGroups    = "CompactionGroups"    // groups committed
	LockWait            = "LockWait"            // time spent acquiring table locks
	LockLost            = "LockLost"            // leases lost or expired mid-run
	UnreclaimedVersions = "UnreclaimedVersions" // stored versions below the floor (backlog)
	SmallFragments      = "SmallFragments"      // fragments under the target rows (backlog)
	MessagesFailed      = "MessagesFailed"      // cleanup messages that failed
)

// CompactionDeletedKept: deleted rows a Lance compaction kept (they cannot
// be dropped); recorded only when > 0.
const CompactionDeletedKept = "CompactionDeletedKept"

// Metric names recorded by the Lambda functions per invocation
// (docs/aws.md, "Metrics").
const (
	TablesMaintained     = "TablesMaintained"     // tables a compactor pass maintained without error
	TablesBusy           = "TablesBusy"           // tables whose lock another holder had
	TableErrors          = "TableErrors"          // tables (or the scan) that failed
	TablesNotReached     = "TablesNotReached"     // registered tables the pass had no time for
	TablesInRetry        = "TablesInRetry"        // tables waiting on a retry job's backoff
	RangesEnqueued       = "RangesEnqueued"       // prunable version ranges sent to the cleanup queue
	JobsEnqueued         = "JobsEnqueued"         // table jobs sent to the compaction queue
	JobsDone             = "JobsDone"             // table jobs finished
	JobsRetried          = "JobsRetried"          // table jobs that failed and were sent again with backoff
	JobsContinued        = "JobsContinued"        // table jobs stopped at the deadline and continued
	JobsDeferred         = "JobsDeferred"         // table jobs not yet due, sent back with their wait
	MessagesCleaned      = "MessagesCleaned"      // cleanup messages done
	MessagesDropped      = "MessagesDropped"      // messages that can never be processed, acknowledged
	MessagesRetried      = "MessagesRetried"      // messages reported as batch item failures
	MessagesContinued    = "MessagesContinued"    // cleanup messages continued in a follow-up
	MessagesDeferred     = "MessagesDeferred"     // cleanup messages sent back to wait
	NotificationsIgnored = "NotificationsIgnored" // S3 notifications that named no table to maintain
	NotificationsMissing = "NotificationsMissing" // scheduled passes listing every table: notifications on, the bucket sends none
	OrphansDeleted       = "OrphansDeleted"       // orphan keys the sweeper deleted
)

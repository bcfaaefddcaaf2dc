package awsfn

import (
	"net/url"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"strconv"
	"strings"
	"time"
)

// Environment variables of the fan-out (compactor only, all optional).
const (
	// EnvCompactionQueueURL is the compaction queue: set, the scheduled
	// compactor hands what it cannot finish to it as table jobs, and the
	// compactor takes SQS batches from it (table jobs and S3 notifications).
	EnvCompactionQueueURL = "TABLEKEEP_COMPACTION_QUEUE_URL"
	// EnvInlineTables bounds the tables a scheduled invocation maintains
	// itself before fanning the rest out (default: as many as its deadline
	// allows; 0: fan every table out).
	EnvInlineTables = "TABLEKEEP_INLINE_TABLES"
	// EnvInlineTime bounds the time a scheduled invocation spends
	// maintaining tables itself (default: until its deadline); tables not
	// started by then are fanned out, so the invocation ends soon after.
	EnvInlineTime = "TABLEKEEP_INLINE_TIME"
	// EnvSafetyScanEvery, with S3 notifications on (a notified write is
	// maintained by the compaction queue), is the safety-net cadence: the
	// scheduled scan lists an unchanged table once per this duration instead
	// of at every run (fleet.Options.SafetyScanEvery; docs/reliability.md
	// "Safety-net scan"). Unset or 0: every run lists every table. The
	// template sets 6h when ManifestNotifications is Enabled.
	EnvSafetyScanEvery = "TABLEKEEP_SAFETY_SCAN_EVERY"
)

// unnotified: the tables the notification path ignores (notifiedTable),
// listed by every scheduled scan even with the safety-net scan on.
func unnotified(ref maintenance.TableRef) bool { return ref.Name == catalog.StatsName }

// loadFanout reads the fan-out variables into c (LoadConfig's helper).
func loadFanout(c *Config, getenv func(string) string, bad func(string, ...any)) {
	c.InlineTables = -1
	if c.Role != RoleCompactor {
		return
	}
	c.CompactionQueueURL = strings.TrimSpace(getenv(EnvCompactionQueueURL))
	if c.CompactionQueueURL != "" {
		if u, err := url.Parse(c.CompactionQueueURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || queueName(c.CompactionQueueURL) == "" {
			bad("%s=%q is not a queue URL (want https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)", EnvCompactionQueueURL, c.CompactionQueueURL)
		} else if c.CompactionQueueURL == c.QueueURL {
			bad("%s must differ from %s (the cleanup queue)", EnvCompactionQueueURL, EnvQueueURL)
		}
	}
	if v := strings.TrimSpace(getenv(EnvInlineTables)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			bad("%s=%q must be a whole number (0 fans every table out)", EnvInlineTables, v)
		} else {
			c.InlineTables = n
		}
	}
	if v := strings.TrimSpace(getenv(EnvSafetyScanEvery)); v != "" && v != "0" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > fleet.MaxSafetyScanEvery {
			bad("%s=%q must be 0 or a duration up to %s (e.g. 6h)", EnvSafetyScanEvery, v, fleet.MaxSafetyScanEvery)
		} else {
			c.SafetyScanEvery = d
		}
	}
	if v := strings.TrimSpace(getenv(EnvInlineTime)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 15*time.Minute {
			bad("%s=%q must be a duration between 0s and 15m (e.g. 45s)", EnvInlineTime, v)
		} else {
			c.InlineTime = d
		}
	}
}

// queueName is the last path segment of a queue URL (or of an ARN, after
// its last colon).
func queueName(urlOrARN string) string {
	s := strings.TrimRight(urlOrARN, "/")
	if strings.HasPrefix(s, "arn:") {
		return s[strings.LastIndex(s, ":")+1:]
	}
	return s[strings.LastIndex(s, "/")+1:]
}

package fleet

import "time"

// Backoff is the one failure backoff of a failing table, whatever retries
// it: B(k) = min(Base x 2^(k-1), Max) after its k-th consecutive failure
// (its maintenance, or its compaction alone, counted separately). The mode
// is the parameter: the scheduled passes' (ModePass) or the AWS fan-out's,
// whose retry jobs follow the retry time the index records (ModeJobs).
type Backoff struct {
	Base, Max time.Duration
}

// Mode names the two deployments of the one backoff.
type Mode int

const (
	// ModePass: a failed table is retried by a later scheduled pass
	// (embedded, CLI, the compactor without fan-out): 15 min to 6 h.
	ModePass Mode = iota
	// ModeJobs: a failed table is retried by its own job on the
	// compaction queue (the AWS fan-out): 1 min to 1 h.
	ModeJobs
)

// The jobs' backoff: 1 min doubling to 1 h.
const (
	jobsBackoffBase = time.Minute
	jobsBackoffMax  = time.Hour
)

// BackoffOf is the backoff of a mode.
func BackoffOf(m Mode) Backoff {
	if m == ModeJobs {
		return Backoff{Base: jobsBackoffBase, Max: jobsBackoffMax}
	}
	return Backoff{Base: 15 * time.Minute, Max: 6 * time.Hour}
}

// Delay is B(k); k < 1 counts as 1; a zero Base or Max is ModePass's; the
// doubling saturates (any overflow is Max).
func (b Backoff) Delay(k int) time.Duration {
	def := BackoffOf(ModePass)
	base, most := b.Base, b.Max
	if base <= 0 {
		base = def.Base
	}
	if most <= 0 {
		most = def.Max
	}
	d := base
	for i := 1; i < k && d < most; i++ {
		d *= 2
		if d <= 0 {
			return most
		}
	}
	return min(d, most)
}

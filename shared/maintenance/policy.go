package maintenance

import (
	"errors"
	"fmt"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// Policy is a table's maintenance policy (stored per table in _registry).
type Policy struct {
	TargetRows       uint64        // compaction target rows per fragment
	DeletedThreshold float64       // fragments with more deleted rows than this share are rewritten
	MaxGroups        int           // compaction groups per run
	MaxInputBytes    uint64        // input bytes per run
	Grace            time.Duration // superseded versions and unreferenced files stay this long
	KeepLast         int           // the newest versions always kept
	RangeVersions    uint64        // versions per cleanup message
	MaxKeysPerRun    int           // keys one cleaner invocation deletes
	DeleteBatch      int           // keys per delete request (<= 1000)
	ReplanAfter      time.Duration // re-enqueue a range still not cleaned after this long

	// Need triggers (fleet.Scheduler.Run maintains a table only when it needs it;
	// see mark.go and docs/reliability.md "Fleet passes").

	// CompactMinFragments: a changed table is maintained once the fragments
	// the compaction planner would take (small or deletion-heavy, counted
	// at its last maintenance, plus one per version committed since) reach
	// this many.
	CompactMinFragments int
	// CompactMaxWait: ... or once such fragments have waited this long
	// (measured from the scan that first saw the change).
	CompactMaxWait time.Duration
	// PruneMinVersions: an unchanged table is maintained once this many of
	// its retained versions have become prunable.
	PruneMinVersions int
	// PruneMaxWait: ... or once its first version became prunable this long ago.
	PruneMaxWait time.Duration
	// FullCheckEvery bounds how long any table goes without a full
	// maintenance, whatever its mark says (the safety net for what the
	// mark does not see: a tag removed, a mark written by an older release).
	// Each table's check falls in the second half of the period, at a
	// point fixed by its name, so a fleet's checks are spread out.
	FullCheckEvery time.Duration
}

// DefaultPolicy is the policy of a table registered without one.
func DefaultPolicy() Policy {
	return Policy{
		TargetRows:       1 << 20,
		DeletedThreshold: 0.10,
		MaxGroups:        64,
		MaxInputBytes:    4 << 30,
		Grace:            time.Hour,
		KeepLast:         10,
		RangeVersions:    1000,
		MaxKeysPerRun:    10000,
		DeleteBatch:      1000,
		ReplanAfter:      6 * time.Hour,
		// Chosen from the cost model (docs/benchmarks.md, "Fleet"): at one
		// write a minute and one pass every 15 min, 36 fragments (or
		// prunable versions) is reached in the third pass, so an active
		// table is compacted and pruned every third pass: the most that
		// keeps it at <= 100 versions under a 1-hour grace (~60 retained +
		// two passes of writes; measured <= 94) with a manifest of ~1 KB,
		// and a third fewer maintenances than every other pass (24). An
		// hour bounds how long a trickle of writes waits.
		CompactMinFragments: 36,
		CompactMaxWait:      time.Hour,
		PruneMinVersions:    36,
		PruneMaxWait:        time.Hour,
		FullCheckEvery:      7 * 24 * time.Hour,
	}
}

// WithDefaults fills zero fields from DefaultPolicy.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.TargetRows == 0 {
		p.TargetRows = d.TargetRows
	}
	if p.DeletedThreshold <= 0 {
		p.DeletedThreshold = d.DeletedThreshold
	}
	if p.MaxGroups <= 0 {
		p.MaxGroups = d.MaxGroups
	}
	if p.MaxInputBytes == 0 {
		p.MaxInputBytes = d.MaxInputBytes
	}
	if p.Grace <= 0 {
		p.Grace = d.Grace
	}
	if p.KeepLast <= 0 {
		p.KeepLast = d.KeepLast
	}
	if p.RangeVersions == 0 {
		p.RangeVersions = d.RangeVersions
	}
	if p.MaxKeysPerRun <= 0 {
		p.MaxKeysPerRun = d.MaxKeysPerRun
	}
	if p.DeleteBatch <= 0 || p.DeleteBatch > 1000 {
		p.DeleteBatch = d.DeleteBatch
	}
	if p.ReplanAfter <= 0 {
		p.ReplanAfter = d.ReplanAfter
	}
	if p.CompactMinFragments <= 0 {
		p.CompactMinFragments = d.CompactMinFragments
	}
	if p.CompactMaxWait <= 0 {
		p.CompactMaxWait = d.CompactMaxWait
	}
	if p.PruneMinVersions <= 0 {
		p.PruneMinVersions = d.PruneMinVersions
	}
	if p.PruneMaxWait <= 0 {
		p.PruneMaxWait = d.PruneMaxWait
	}
	if p.FullCheckEvery <= 0 {
		p.FullCheckEvery = d.FullCheckEvery
	}
	return p
}

// Validate rejects policies that would be unsafe or useless.
func (p Policy) Validate() error {
	switch {
	case p.KeepLast < 1:
		return fmt.Errorf("%w: keep-last %d must be at least 1", ErrInvalidPolicy, p.KeepLast)
	case p.Grace < table.DefaultGrace:
		// Writers refuse to commit on a read older than their grace window
		// (table.Options.Grace, default 1 h). A shorter maintenance grace
		// would let cleanup and the sweep delete a version, or the files a
		// slow writer just wrote, while that writer may still commit on them.
		return fmt.Errorf("%w: grace %s is shorter than the writers' grace window %s", ErrInvalidPolicy, p.Grace, table.DefaultGrace)
	case p.Grace > table.MaxGrace:
		return fmt.Errorf("%w: grace %s is longer than the maximum %s", ErrInvalidPolicy, p.Grace, table.MaxGrace)
	case p.DeletedThreshold <= 0 || p.DeletedThreshold > 1:
		return fmt.Errorf("%w: deleted threshold %v must be in (0, 1]", ErrInvalidPolicy, p.DeletedThreshold)
	case p.RangeVersions > 100000:
		return fmt.Errorf("%w: range of %d versions is too large", ErrInvalidPolicy, p.RangeVersions)
	}
	return nil
}

// Sentinel errors.
var (
	ErrInvalidPolicy  = errors.New("invalid maintenance policy")
	ErrUnknownTable   = errors.New("unknown table")
	ErrInvalidMessage = errors.New("invalid cleanup message")
	ErrForeignKey     = errors.New("key outside the table")
	ErrAboveFloor     = errors.New("range not below the retention floor")
	// ErrFloorUnproven: a range below the readers' floor but not below a
	// floor trusted for deletion (a stamped marker whose manifest has its
	// stamp: docs/format.md 2.4). Nothing is deleted; not permanent.
	ErrFloorUnproven = errors.New("range not below a floor trusted for deletion")
	ErrIntegrity     = errors.New("integrity check failed")
)

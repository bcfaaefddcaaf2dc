package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// CleanSourceRange cleans one range of src with a Cleaner of the given
// limits and no StopBy (Cleaner.Clean is the production path: it keeps its
// AIMD rates across messages and records the cleanup state). The range
// must be below the floor; files first (in batches, in any order), then
// the change records, then the manifests, so a crash part-way leaves
// manifests whose files may be gone only below the floor. Every step is
// idempotent: a redelivery finds records missing and deletes what is left.
func CleanSourceRange(ctx context.Context, src Source, msg RangeMessage, p Policy, lim CleanerLimits, requeue Enqueuer) (CleanResult, error) {
	c := &Cleaner{Store: src.Store(), Requeue: requeue, Limits: lim}
	if tb, ok := src.(TableBacked); ok {
		c.OpenOpts.Clock = tb.Table().Options().Clock // the age rule's clock (else the real one)
	}
	ref := TableRef{Name: msg.Table, Root: src.Root(), Policy: p}
	return c.cleanRange(ctx, src.Store(), sourceJob(src, ref, msg, "", false))
}

// sourceJob is the rangeJob of a range of src: ready reads the floor (the
// range must be below it), then the tags, while the first records are
// read. A FloorReader's floor is its highest stamped marker's (the range
// must be below that too, else ErrFloorUnproven, retried), and the stamp
// is checked against its version's manifest before deleting
// (floorOfThisHistory). sizes: a SizeLister's deleted bytes are measured.
func sourceJob(src Source, ref TableRef, msg RangeMessage, stateRoot string, sizes bool) rangeJob {
	var floor uint64
	var fr table.FloorRead
	frd, fast := src.(FloorReader)
	refs, oneList := src.(RefsReader)
	ready := func(ctx context.Context) (map[uint64]bool, error) {
		var err error
		var tags map[string]uint64
		switch {
		case oneList && fast:
			// The floor and the tags from one LIST of _refs/ (the floor's
			// keys first): docs/reliability.md, "The cleaner's floor and
			// tags".
			fr, tags, err = refs.ReadRefs(ctx)
			floor = fr.Floor
		case fast:
			fr, err = frd.ReadFloor(ctx)
			floor = fr.Floor
		default:
			floor, err = src.Floor(ctx)
		}
		if err != nil {
			return nil, err
		}
		if msg.To >= floor {
			return nil, fmt.Errorf("%w: %w: [%d, %d] with floor %d", queue.ErrPermanent, ErrAboveFloor, msg.From, msg.To, floor)
		}
		if fast {
			// Only a stamped marker's floor is trusted for deletion (its
			// stamp is checked against its manifest before deleting:
			// floorOfThisHistory); the readers' floor may be a legacy
			// object's or an unstamped marker's (docs/format.md 2.4).
			sf, _, ok := fr.StampedFloor()
			if !ok || msg.To >= sf {
				return nil, fmt.Errorf("%w: %s: [%d, %d] is below the floor %d read but not below the highest stamped marker's (%d); nothing deleted (retried: a maintenance pass raises the stamped floor if the range is prunable)",
					ErrFloorUnproven, src.Root(), msg.From, msg.To, floor, sf)
			}
			floor = sf
		}
		if tags == nil {
			tags, err = src.Tags(ctx)
		}
		return versionSet(tags), err
	}
	j := rangeJob{ref: ref, msg: msg, reader: sourceReader{src}, ready: ready, stateRoot: stateRoot,
		root: src.Root(), latest: src.LatestRefs, floor: &floor, fileGrace: src.Grace}
	if lb, ok := src.(ListedBelowFloor); ok {
		j.listed = lb
	}
	if ts, ok := src.(*TableSource); ok {
		// The handle has read no manifest: W is the one the guard reads.
		var w time.Duration
		j.latest = tableLatestGrace(ts.T.Store(), ts.T.Root(), ts.T.Options(), &w)
		j.fileGrace = func(p time.Duration) time.Duration { return table.RetentionGrace(p, w) }
	}
	if sl, ok := src.(SizeLister); ok && sizes {
		j.sizes = sl.SizePrefixes()
	}
	var checks []func(context.Context, []string) error
	if cc, ok := src.(CleanChecker); ok {
		checks = append(checks, cc.CheckClean)
	}
	if fast {
		checks = append(checks, func(ctx context.Context, _ []string) error {
			return floorOfThisHistory(ctx, src.Store(), src.Root(), fr)
		})
	}
	switch len(checks) {
	case 1:
		j.check = checks[0]
	case 2:
		j.check = func(ctx context.Context, keys []string) error {
			return inParallel(ctx,
				func(ctx context.Context) error { return checks[0](ctx, keys) },
				func(ctx context.Context) error { return checks[1](ctx, keys) })
		}
	}
	return j
}

// ErrUnknownFormat: a table registered with a format no SourceOpener knows.
var ErrUnknownFormat = errors.New("unknown table format")

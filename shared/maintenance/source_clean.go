package maintenance

import (
	"context"
	"errors"
	"fmt"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// PlanSourceRange reads the change records of msg's range from src and
// returns what cleaning it deletes (no deletes), with the cleaner's rules
// (scanRange, as PlanRange): a file removed at version r was referenced by
// [Since, r-1] and is kept if a tagged version is among them; the range
// [From, To] owns the records [From+1, To+1] and the untagged manifests
// [From, To]. A directory key (ending in "/") is expanded by listing it.
// It stops once maxKeys data keys are collected (0: no bound) and returns
// the rest as a continuation; reads bounds the GETs in flight.
func PlanSourceRange(ctx context.Context, src Source, msg RangeMessage, maxKeys, reads int) (RangePlan, error) {
	return scanRange(ctx, sourceReader{src}, msg, scanOpts{maxKeys: maxKeys, reads: reads},
		func(ctx context.Context) (map[uint64]bool, error) {
			tags, err := src.Tags(ctx)
			return versionSet(tags), err
		})
}

// CleanSourceRange cleans one range of src with a Cleaner of the given
// limits and no StopBy (Cleaner.Clean is the production path: it keeps its
// AIMD rates across messages and records the cleanup state). The range
// must be below the floor; files first (in batches, in any order), then
// the change records, then the manifests, so a crash part-way leaves
// manifests whose files may be gone only below the floor. Every step is
// idempotent: a redelivery finds records missing and deletes what is left.
func CleanSourceRange(ctx context.Context, src Source, msg RangeMessage, p Policy, lim CleanerLimits, requeue Enqueuer) (CleanResult, error) {
	c := &Cleaner{Store: src.Store(), Requeue: requeue, Limits: lim}
	ref := TableRef{Name: msg.Table, Root: src.Root(), Policy: p}
	return c.cleanRange(ctx, src.Store(), sourceJob(src, ref, msg, ""))
}

// sourceJob is the rangeJob of a range of src: ready reads the floor (the
// range must be below it), then the tags, while the first records are read.
func sourceJob(src Source, ref TableRef, msg RangeMessage, stateRoot string) rangeJob {
	var floor uint64
	ready := func(ctx context.Context) (map[uint64]bool, error) {
		var err error
		floor, err = src.Floor(ctx)
		if err != nil {
			return nil, err
		}
		if msg.To >= floor {
			return nil, fmt.Errorf("%w: %w: [%d, %d] with floor %d", queue.ErrPermanent, ErrAboveFloor, msg.From, msg.To, floor)
		}
		tags, err := src.Tags(ctx)
		return versionSet(tags), err
	}
	j := rangeJob{ref: ref, msg: msg, reader: sourceReader{src}, ready: ready, stateRoot: stateRoot,
		root: src.Root(), latest: src.LatestRefs, floor: &floor}
	if cc, ok := src.(CleanChecker); ok {
		j.check = cc.CheckClean
	}
	return j
}

// ErrUnknownFormat: a table registered with a format no SourceOpener knows.
var ErrUnknownFormat = errors.New("unknown table format")

// cleanSource is Cleaner.clean for a dataset of another format: the same
// range cleaning (StopBy continuations, the AIMD limiters and SlowDown
// retries, batched deletes) through the dataset's Source. Deleted bytes
// are not measured (the size listings know tablekeep's layout only).
func (c *Cleaner) cleanSource(ctx context.Context, store objstore.Store, ref TableRef, msg RangeMessage) (CleanResult, error) {
	res := CleanResult{Table: msg.Table, From: msg.From, To: msg.To}
	if c.Sources == nil {
		return res, fmt.Errorf("%w: %w: %q", queue.ErrPermanent, ErrUnknownFormat, ref.Format)
	}
	src, err := c.Sources(ctx, store, ref)
	if errors.Is(err, ErrUnknownFormat) {
		return res, fmt.Errorf("%w: %w", queue.ErrPermanent, err)
	}
	if err != nil {
		return res, err
	}
	// The cleanup state (Runner stats' LastCleanup) goes in the dataset's
	// sidecar.
	return c.cleanRange(ctx, store, sourceJob(src, ref, msg, src.StateRoot()))
}

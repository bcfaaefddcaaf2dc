package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// PlanSourceRange reads the change records of msg's range from src and
// returns what cleaning it deletes (no deletes), with the same rules as
// PlanRange: a file removed at version r was referenced by [Since, r-1]
// and is kept if a tagged version is among them; the range [From, To]
// owns the records [From+1, To+1] and the untagged manifests [From, To].
// A directory key (ending in "/") is expanded by listing it. It stops
// once maxKeys data keys are collected (0: no bound) and returns the rest
// as a continuation.
func PlanSourceRange(ctx context.Context, src Source, msg RangeMessage, maxKeys, reads int) (RangePlan, error) {
	rp := RangePlan{Range: msg}
	tags, err := src.Tags(ctx)
	if err != nil {
		return rp, err
	}
	tagged := map[uint64]bool{}
	for _, v := range tags {
		tagged[v] = true
	}
	taggedIn := func(lo, hi uint64) bool {
		for v := range tagged {
			if v >= lo && v <= hi {
				return true
			}
		}
		return false
	}
	first := max(msg.From+1, msg.Cursor+1)
	end := msg.To + 1
	reads = max(1, reads)
	// Windows of 4 x reads records, reads GETs in flight, consumed in
	// version order (a stop wastes at most one window of reads).
	window := uint64(4 * reads)
	last := first - 1
	for lo := first; lo <= end; lo += window {
		hi := min(end, lo+window-1)
		recs := make([]*table.ChangeRecord, hi-lo+1)
		errs := make([]error, len(recs))
		var g errgroup.Group
		g.SetLimit(reads)
		for i := range recs {
			g.Go(func() error {
				recs[i], errs[i] = src.ChangeRecord(ctx, lo+uint64(i))
				return nil
			})
		}
		_ = g.Wait()
		stop := false
		for i, cr := range recs {
			r := lo + uint64(i)
			switch {
			case errors.Is(errs[i], objstore.ErrNotExist):
				rp.Missing++
			case errs[i] != nil:
				return rp, errs[i]
			default:
				rp.ChangeRecords++
				for _, rf := range cr.Removed {
					if err := checkSourceKey(src, rf.Key); err != nil {
						return rp, fmt.Errorf("%w: change record %d: %w", queue.ErrPermanent, r, err)
					}
					if taggedIn(rf.Since, r-1) {
						rp.KeptForTags++
						continue
					}
					keys, err := expandKey(ctx, src, rf.Key)
					if err != nil {
						return rp, err
					}
					rp.DataKeys = append(rp.DataKeys, keys...)
				}
			}
			last = r
			if maxKeys > 0 && len(rp.DataKeys) >= maxKeys {
				stop = true
				break
			}
		}
		if stop {
			break
		}
	}
	if last < end {
		cont := msg
		cont.Cursor = last
		rp.Continuation = &cont
		return rp, nil
	}
	if msg.From == 1 {
		rp.MetaKeys = append(rp.MetaKeys, src.Root()+src.RecordKey(1)) // nothing removed at version 1
	}
	for v := msg.From + 1; v <= msg.To+1; v++ {
		rp.MetaKeys = append(rp.MetaKeys, src.Root()+src.RecordKey(v))
	}
	for v := msg.From; v <= msg.To; v++ {
		if tagged[v] {
			continue
		}
		keys, err := src.ManifestKeys(ctx, v)
		if err != nil {
			return rp, err
		}
		for _, k := range keys {
			rp.MetaKeys = append(rp.MetaKeys, src.Root()+k)
		}
		rp.VersionsDeleted++
	}
	return rp, nil
}

// expandKey returns the full keys a change-record key stands for: itself,
// or everything under it for a directory key.
func expandKey(ctx context.Context, src Source, rel string) ([]string, error) {
	if !strings.HasSuffix(rel, "/") {
		return []string{src.Root() + rel}, nil
	}
	var out []string
	err := objstore.ListAll(ctx, src.Store(), src.Root()+rel, "", func(o objstore.ObjectInfo) error {
		out = append(out, o.Key)
		return nil
	})
	return out, err
}

// CleanSourceRange cleans one range of src: the range must be below the
// floor; files first (in batches, in any order), then the change records,
// then the manifests, so a crash part-way leaves manifests whose files may
// be gone only below the floor. Every step is idempotent: a redelivery
// finds records missing and deletes what is left.
func CleanSourceRange(ctx context.Context, src Source, msg RangeMessage, p Policy, lim CleanerLimits, requeue Enqueuer) (CleanResult, error) {
	res := CleanResult{Table: msg.Table, From: msg.From, To: msg.To}
	p = p.WithDefaults()
	lim = lim.withDefaults()
	floor, err := src.Floor(ctx)
	if err != nil {
		return res, err
	}
	if msg.To >= floor {
		return res, fmt.Errorf("%w: %w: [%d, %d] with floor %d", queue.ErrPermanent, ErrAboveFloor, msg.From, msg.To, floor)
	}
	rp, err := PlanSourceRange(ctx, src, msg, p.MaxKeysPerRun, lim.Reads)
	if err != nil {
		return res, err
	}
	res.ChangeRecords, res.KeptForTags = rp.ChangeRecords, rp.KeptForTags
	del := newDeleter(ctx, src.Store(), p.DeleteBatch, lim.Deletes, nil, lim.Retries)
	del.add(rp.DataKeys...)
	n, reqs, err := del.wait()
	res.DataKeys, res.DeleteRequests = n, reqs
	if err != nil {
		return res, err
	}
	if rp.Continuation != nil {
		res.Continuation = rp.Continuation
		if err := requeue.Send(ctx, [][]byte{rp.Continuation.Encode()}); err != nil {
			return res, fmt.Errorf("enqueue continuation: %w", err)
		}
		return res, nil
	}
	// Records before manifests, one batch at a time: a crash between them
	// leaves manifests the planner sees and re-plans, never records alone.
	mdel := newDeleter(ctx, src.Store(), p.DeleteBatch, 1, nil, lim.Retries)
	mdel.add(rp.MetaKeys...)
	n, reqs, err = mdel.wait()
	res.ManifestKeys, res.DeleteRequests = n, res.DeleteRequests+reqs
	res.VersionsDeleted = rp.VersionsDeleted
	return res, err
}

// ErrUnknownFormat: a table registered with a format no SourceOpener knows.
var ErrUnknownFormat = errors.New("unknown table format")

// cleanSource is Cleaner.clean for a dataset of another format.
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
	res, err = CleanSourceRange(ctx, src, msg, ref.Policy, c.Limits, c.Requeue)
	if err == nil && res.Continuation == nil && !res.Deferred {
		// For status (Runner stats' LastCleanup), in the dataset's sidecar.
		c.markCleaned(ctx, store, src.StateRoot(), msg, c.now())
	}
	return res, err
}

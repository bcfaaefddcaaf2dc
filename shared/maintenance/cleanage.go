package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// The cleaner's age rule (docs/reliability.md, "Time"; issue 29 item 5):
// whatever a change record says, the cleaner deletes a file only if the
// store dated it more than the dataset's file grace (Source.Grace: R =
// max(min(P, MaxGrace), W) + SafetyMargin for a tablekeep table, W read
// from the latest manifest; P + SafetyMargin for a Lance dataset) before
// the cleaner's clock, read before the latest-version guard reads the
// latest version. A writer commits a file only while it is at most W old
// and its manifest lands within MaxCommitDuration of that check, so a file
// older than R can no longer be committed by anyone, and any commit of it
// landed before the guard's read. A legitimate record's files are older
// than R: they were uploaded before a version below the floor, superseded
// more than R ago. So a younger file named by a record is a corrupt
// record's (or one written under a shorter grace): it is kept, counted in
// CleanResult.KeptYoung and logged, and the range goes on and finishes;
// an upload that is never committed is the orphan sweep's once older than
// R, a committed one stays referenced.
//
// The ages come from listings and HEADs, whichever costs less, run beside
// the guard's reads. On S3 a LIST costs 12.5 HEADs, so the keys of one
// directory (data/, _deletions/, a Lance index) are listed when there are
// at least headsPerList of them, at most one page per headsPerList keys
// (and maxAgeListPages): a key the listing passed and did not find is gone
// already and is not deleted; a key beyond where it stopped, and the keys
// of a directory with fewer, get one HEAD each (a HEAD that finds nothing:
// gone, not deleted). So the ages of k keys cost at most k HEADs' price
// more than the HEADs alone, and one LIST per 1,000 files of the
// directory when it is small (a compacted table: one LIST for its data
// files). No conditional delete helps: S3's DeleteObjects takes per-key
// ETag conditions (which a HEAD or LIST would have to read first) and none
// on age.
const (
	headsPerList    = 12
	maxAgeListPages = 10
)

// keyAges is the store time of each data key a range is about to delete,
// read by HEAD (read), then split by age (old).
type keyAges struct {
	keys []string
	at   []time.Time // zero: not found
}

// readAges reads the store time of every key: the directories with at
// least headsPerList keys listed (all at once), then the rest HEADed,
// reads at a time, paced by lim (a SlowDown answer retried up to retries
// times with the rate lowered).
func readAges(ctx context.Context, store objstore.Store, keys []string, lim *objstore.AIMDLimiter, reads, retries int) (*keyAges, error) {
	a := &keyAges{keys: keys, at: make([]time.Time, len(keys))}
	byDir := map[string][]int{}
	for i, k := range keys {
		dir := k[:strings.LastIndexByte(k, '/')+1]
		byDir[dir] = append(byDir[dir], i)
	}
	var mu sync.Mutex
	var heads []int
	g, gctx := errgroup.WithContext(ctx)
	for dir, idx := range byDir {
		pages := min(len(idx)/headsPerList, maxAgeListPages)
		if pages == 0 || dir == "" {
			heads = append(heads, idx...)
			continue
		}
		g.Go(func() error {
			listed := make(map[int]bool, len(idx))
			want := make(map[string]int, len(idx))
			for _, i := range idx {
				want[keys[i]] = i
			}
			seen, last := 0, ""
			err := objstore.ListAll(gctx, store, dir, "", func(o objstore.ObjectInfo) error {
				if i, ok := want[o.Key]; ok {
					a.at[i], listed[i] = o.LastModified, true
				}
				last = o.Key
				if seen++; seen >= pages*objstore.MaxListKeys {
					return errStopList
				}
				return nil
			})
			if err != nil && !errors.Is(err, errStopList) {
				return fmt.Errorf("list %s for the ages of the files to delete: %w", dir, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, i := range idx {
				// Beyond where the listing stopped, or listed with no time:
				// a HEAD. Passed and not listed: gone.
				if listed[i] && a.at[i].IsZero() || !listed[i] && err != nil && keys[i] > last {
					heads = append(heads, i)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(max(1, reads))
	for _, i := range heads {
		k := keys[i]
		g.Go(func() error {
			info, err := paced(gctx, lim, retries, func() (objstore.ObjectInfo, error) { return store.Head(gctx, k) })
			switch {
			case errors.Is(err, objstore.ErrNotExist):
				return nil
			case err != nil:
				return fmt.Errorf("read the age of %s before deleting: %w", k, err)
			}
			if info.LastModified.IsZero() {
				return fmt.Errorf("read the age of %s before deleting: the store gave no time", k)
			}
			a.at[i] = info.LastModified
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return a, nil
}

// paced is one request through fn, paced by lim (nil: none), a SlowDown
// answer retried up to retries times with the rate lowered (the cleaner's
// change-record GETs and age HEADs).
func paced[T any](ctx context.Context, lim *objstore.AIMDLimiter, retries int, fn func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		if lim != nil {
			if err := lim.Wait(ctx, 1); err != nil {
				var zero T
				return zero, err
			}
		}
		v, err := fn()
		if lim != nil {
			switch {
			case err == nil || errors.Is(err, objstore.ErrNotExist):
				lim.Success()
			case errors.Is(err, objstore.ErrSlowDown):
				lim.SlowDown()
				if attempt < retries {
					continue
				}
			}
		}
		return v, err
	}
}

// old returns the keys to delete: found, and dated more than minAge before
// now (now - LastModified > minAge); young are the found keys kept.
func (a *keyAges) old(now time.Time, minAge time.Duration) (del, young []string) {
	for i, k := range a.keys {
		switch {
		case a.at[i].IsZero():
		case now.Sub(a.at[i]) > minAge:
			del = append(del, k)
		default:
			young = append(young, k)
		}
	}
	return del, young
}

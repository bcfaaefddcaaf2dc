package maintenance_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestPaceCleanerByStore: pacing is a property of the store. A cleaner on
// a local disk builds no limiter (it deletes as fast as the disk takes:
// before, it paced every store at S3's 3,500 keys/s and 5,500 GET/s); on
// a store that stands for S3 (the S3 latency profile) it paces at S3's
// rates. Both leave the same files.
func TestPaceCleanerByStore(t *testing.T) {
	p := testPolicy()
	p.RangeVersions = 30
	dir, bs := manyVersions(t, p, 60)
	run := func(wrap func(objstore.Store) objstore.Store) (*maintenance.Cleaner, map[string]int64) {
		d := filepath.Join(t.TempDir(), "w")
		copyDir(t, dir, d)
		e := newEnv(t, d, p, queue.EmbeddedOptions{})
		e.clock.Advance(2 * time.Hour)
		rec := &bodies{}
		c := &maintenance.Cleaner{Store: wrap(e.disk), Tables: e.cat, Requeue: rec, Logger: discard, OpenOpts: table.Options{Clock: e.clock}}
		cleanAll(t, c, rec, bs)
		return c, listing(t, e.disk, "")
	}
	disk, diskLeft := run(func(s objstore.Store) objstore.Store { return objstore.NewCounting(s) })
	if disk.GetLimit != nil || disk.DeleteLimit != nil {
		t.Fatalf("a cleaner on a local disk is paced: GETs %v, deletes %v", disk.GetLimit, disk.DeleteLimit)
	}
	noSleep := fakeclock.NoSleep(nil)
	s3, s3Left := run(func(s objstore.Store) objstore.Store {
		return objstore.NewCounting(objstore.NewLatency(s, objstore.S3Profile(), noSleep))
	})
	if s3.GetLimit == nil || s3.DeleteLimit == nil || s3.GetLimit.Rate() != objstore.S3GetsPerSecond || s3.DeleteLimit.Rate() != objstore.S3DeleteKeysPerSecond {
		t.Fatalf("a cleaner on an S3-profile store: limiters %v %v, want S3's rates", s3.GetLimit, s3.DeleteLimit)
	}
	if err := sameListing(diskLeft, s3Left); err != nil {
		t.Fatalf("paced and unpaced cleaners left different stores: %v", err)
	}
}

// TestSweepRetriesSlowDown: the orphan sweep deletes through the cleaner's
// paced deleter, so a SlowDown answer (whole, or for some keys) is retried
// with the rate lowered instead of failing the sweep (before: DeleteAll
// returned ErrSlowDown and the orphans stayed); the request count is the
// requests sent.
func TestSweepRetriesSlowDown(t *testing.T) {
	ctx := context.Background()
	for _, perKey := range []bool{false, true} {
		t.Run(fmt.Sprint("perKey=", perKey), func(t *testing.T) {
			p := testPolicy()
			p.DeleteBatch = 10
			e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{})
			tb := e.create(t)
			upsert(t, tb, "k", "v")
			var orphans []string
			for i := range 25 {
				k := fmt.Sprintf("%s%s%016x.parquet", e.ref.Root, table.DataPrefix, 0xdead0000+i)
				if err := e.disk.Put(ctx, k, []byte("orphan")); err != nil {
					t.Fatal(err)
				}
				orphans = append(orphans, k)
			}
			// The first delete request answers SlowDown; GETs never do.
			st := &slowDownStore{Store: e.disk, slow: func(n int64) bool { return n == 1 }, perKey: perKey, match: "\x00none"}
			swept, err := table.Open(ctx, st, e.ref.Root, e.opts())
			if err != nil {
				t.Fatal(err)
			}
			res, err := maintenance.Sweep(ctx, swept, p, time.Now().Add(30*24*time.Hour), 0, false)
			if err != nil || res.Deleted != len(orphans) {
				t.Fatalf("sweep %+v: %v; want the %d orphans deleted", res, err, len(orphans))
			}
			if st.slowed.Load() != 1 || res.Requests != 4 {
				t.Fatalf("%d SlowDown answers, %d requests: want 1 and 3 batches + 1 retry", st.slowed.Load(), res.Requests)
			}
			for _, k := range orphans {
				if _, err := e.disk.Head(ctx, k); err == nil {
					t.Fatalf("%s left", k)
				}
			}
			checkRetained(t, e.open(t), nil)
		})
	}
}

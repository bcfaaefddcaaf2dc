package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// lanceRecords is in every key of a Lance dataset's change records.
const lanceRecords = "/" + lance.SidecarDir + "changes/"

// recordClockStore advances a fake clock by a latency per change-record
// GET (keys containing match), and by nothing for the other requests.
type recordClockStore struct {
	objstore.Store
	clock *fakeClock
	lat   time.Duration
	match string
}

func (s *recordClockStore) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.Contains(key, s.match) {
		s.clock.Advance(s.lat)
	}
	return s.Store.Get(ctx, key)
}

// TestLanceCleanerStopByAndSlowDown: a LanceDB dataset's ranges drain
// through the same cleaner machinery as a tablekeep table's. StopBy passed
// mid-range stops the range at the next change record: the manifests of
// the versions whose files were read, then those files, are deleted, no
// record, and the rest goes back
// as a continuation whose cursor is exactly the last record consumed;
// reruns finish the ranges and leave exactly what one unbounded drain
// leaves. A forged record mid-range deletes nothing. A store answering SlowDown to change-record GETs and to
// DeleteObjects (whole requests, or per key) lowers the AIMD limiters of
// the Lance path too, paces its deletes to the cap on a fake clock, and
// still leaves exactly the same files.
func TestLanceCleanerStopByAndSlowDown(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	// Plan once (change records, floor, prune state written to base); each
	// case cleans a copy with the same messages.
	ref, _, now, plan, bs := planLancePrune(t, base, 24, 40)
	if len(bs) == 0 {
		t.Fatalf("nothing to clean: %+v", plan)
	}
	t.Logf("floor %d, ranges %v", plan.Floor, plan.Ranges)
	cat := &memCatalog{refs: []maintenance.TableRef{ref}}
	copyStore := func(t *testing.T) (objstore.Store, string) {
		d := t.TempDir()
		copyDir(t, base, d)
		disk, err := objstore.NewDisk(d)
		if err != nil {
			t.Fatal(err)
		}
		return disk, d
	}

	// The reference: one unbounded drain.
	refDisk, _ := copyStore(t)
	before := listing(t, refDisk, "wh/")
	{
		rec := &bodies{}
		c := &maintenance.Cleaner{Store: refDisk, Tables: cat, Requeue: rec, Logger: discard, Sources: formats.Open,
			OpenOpts: table.Options{Clock: fakeclock.New(now)}} // the age rule: at the planner's time
		if n := cleanAll(t, c, rec, bs); n != len(bs) {
			t.Fatalf("the unbounded drain took %d messages for %d ranges", n, len(bs))
		}
	}
	want := listing(t, refDisk, "wh/")
	if len(want) >= len(before) {
		t.Fatal("the reference drain deleted nothing")
	}

	t.Run("StopBy", func(t *testing.T) {
		disk, _ := copyStore(t)
		clock := fakeclock.New(now)
		const lat = 20 * time.Millisecond
		rec := &bodies{}
		// One record in flight: the k-th record consumed has advanced the
		// clock by exactly k GETs, so StopBy at 3.5 GETs stops after the 4th.
		c := &maintenance.Cleaner{
			Store: &recordClockStore{Store: disk, clock: clock, lat: lat, match: lanceRecords}, Tables: cat, Requeue: rec,
			Logger: discard, Sources: formats.Open, OpenOpts: table.Options{Clock: clock}, Limits: maintenance.CleanerLimits{Reads: 1},
		}
		conts, partialDeletes := 0, 0
		for b := bs; len(b) > 0; b = rec.take() {
			for _, body := range b {
				msg, err := maintenance.DecodeRangeMessage(body)
				if err != nil {
					t.Fatal(err)
				}
				c.StopBy = clock.Now().Add(3*lat + lat/2)
				res, err := c.Clean(ctx, body)
				if err != nil || res.Deferred {
					t.Fatalf("clean %s: %+v %v", body, res, err)
				}
				first := max(msg.From, msg.Cursor) + 1
				if res.Continuation == nil {
					if msg.To+1-first+1 > 4 {
						t.Fatalf("%s: %d records to read and StopBy after 4, no continuation: %+v", body, msg.To+1-first+1, res)
					}
					continue
				}
				conts++
				if got := res.Continuation.Cursor; got != first+3 || res.ChangeRecords != 4 {
					t.Fatalf("%s: continuation cursor %d after %d records, want %d after 4", body, got, res.ChangeRecords, first+3)
				}
				// Manifests first (docs/reliability.md, "No listed Lance
				// version is left unreadable"): those of the versions whose
				// files went, [first-1, first+2] less tagged ones; no record.
				if res.ManifestKeys == 0 || res.ManifestKeys > 4 || res.VersionsDeleted != 0 {
					t.Fatalf("%s: a stopped range deleted %d manifests (want those of [%d, %d]), %d versions", body, res.ManifestKeys, first-1, first+2, res.VersionsDeleted)
				}
				for v := first; v <= first+3; v++ {
					if _, err := disk.Head(ctx, ref.Root+lance.SidecarDir+fmt.Sprintf("changes/%020d.json", v)); err != nil {
						t.Fatalf("%s: a stopped range deleted record %d: %v", body, v, err)
					}
				}
				if res.DataKeys > 0 {
					partialDeletes++
				}
			}
		}
		if conts == 0 || partialDeletes == 0 {
			t.Fatalf("%d continuations, %d of them deleted files: StopBy did not stop a range part-way", conts, partialDeletes)
		}
		if err := sameListing(want, listing(t, disk, "wh/")); err != nil {
			t.Fatalf("continuations left a different dataset than one unbounded drain: %v", err)
		}
		t.Logf("%d continuations", conts)
	})

	// A record forged to name a file just uploaded (issue 29 item 5): the
	// cleaner keeps it (younger than P + SafetyMargin by its store time)
	// and finishes the ranges; everything else goes as in the reference.
	t.Run("YoungFile", func(t *testing.T) {
		disk, _ := copyStore(t)
		clock := fakeclock.New(now)
		st := fakeclock.NewStore(disk, clock)
		msg, err := maintenance.DecodeRangeMessage(bs[0])
		if err != nil {
			t.Fatal(err)
		}
		young := ref.Root + lance.DataDir + "young-upload.lance"
		if err := st.Put(ctx, young, []byte("in flight")); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s%schanges/%020d.json", ref.Root, lance.SidecarDir, msg.From+1)
		b, err := disk.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		rec := doc["record"].(map[string]any)
		removed, _ := rec["Removed"].([]any)
		rec["Removed"] = append(removed, map[string]any{"Key": lance.DataDir + "young-upload.lance", "Since": msg.From})
		if b, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		if err := disk.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
		q := &bodies{}
		c := &maintenance.Cleaner{Store: st, Tables: cat, Requeue: q, Logger: discard, Sources: formats.Open,
			OpenOpts: table.Options{Clock: clock}}
		kept := 0
		for b := bs; len(b) > 0; b = q.take() {
			for _, body := range b {
				res, err := c.Clean(ctx, body)
				if err != nil {
					t.Fatalf("clean %s: %v", body, err)
				}
				kept += res.KeptYoung
			}
		}
		got := listing(t, disk, "wh/")
		if _, ok := got[young]; !ok || kept != 1 {
			t.Fatalf("the young file: listed %v, kept %d (want kept once)", ok, kept)
		}
		delete(got, young)
		if err := sameListing(want, got); err != nil {
			t.Fatalf("besides the young file, not what one unbounded drain leaves: %v", err)
		}
	})

	// A forged record in the middle of a range: the records before it
	// name real files, but nothing is deleted (every record of the slice
	// is read and checked first), and the error is permanent.
	t.Run("ForgedRecord", func(t *testing.T) {
		disk, _ := copyStore(t)
		msg, err := maintenance.DecodeRangeMessage(bs[0])
		if err != nil {
			t.Fatal(err)
		}
		v := msg.From + (msg.To-msg.From)/2 + 1
		key := fmt.Sprintf("%s%schanges/%020d.json", ref.Root, lance.SidecarDir, v)
		b, err := disk.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		rec := doc["record"].(map[string]any)
		removed, _ := rec["Removed"].([]any)
		rec["Removed"] = append(removed, map[string]any{"Key": "_versions/1.manifest", "Since": 1})
		if b, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		if err := disk.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
		files := listing(t, disk, "wh/")
		c := &maintenance.Cleaner{Store: disk, Tables: cat, Requeue: &bodies{}, Logger: discard, Sources: formats.Open,
			Limits: maintenance.CleanerLimits{Reads: 1}, OpenOpts: table.Options{Clock: fakeclock.New(now)}}
		_, err = c.Clean(ctx, bs[0])
		if !errors.Is(err, maintenance.ErrForeignKey) || !errors.Is(err, queue.ErrPermanent) {
			t.Fatalf("forged record %d: %v, want a permanent ErrForeignKey", v, err)
		}
		if err := sameListing(files, listing(t, disk, "wh/")); err != nil {
			t.Fatalf("a forged record deleted: %v", err)
		}
	})

	for _, perKey := range []bool{false, true} {
		name := "SlowDown"
		if perKey {
			name += "PerKey"
		}
		t.Run(name, func(t *testing.T) {
			disk, _ := copyStore(t)
			st := &slowDownStore{Store: disk, slow: func(n int64) bool { return n%4 == 0 }, perKey: perKey, match: lanceRecords}
			lclk := fakeclock.New(time.Unix(1e9, 0))
			const capKeys, capGets, burst = 40, 100, 3
			del := objstore.NewAIMDLimiter(objstore.AIMDOptions{Cap: capKeys, Floor: 5, Step: 1, Burst: burst, Cooldown: time.Nanosecond, Clock: lclk})
			get := objstore.NewAIMDLimiter(objstore.AIMDOptions{Cap: capGets, Floor: 5, Step: 1, Burst: burst, Cooldown: time.Nanosecond, Clock: lclk})
			rec := &bodies{}
			c := &maintenance.Cleaner{
				Store: st, Tables: cat, Requeue: rec, Logger: discard, Sources: formats.Open,
				Limits: maintenance.CleanerLimits{Retries: 1000}, GetLimit: get, DeleteLimit: del,
				OpenOpts: table.Options{Clock: fakeclock.New(now)}, // the age rule's clock (lclk paces)
			}
			getLow, delLow := false, false
			for b := bs; len(b) > 0; b = rec.take() {
				for _, body := range b {
					start := lclk.Now()
					res, err := c.Clean(ctx, body)
					if err != nil {
						t.Fatalf("clean %s: %v", body, err)
					}
					getLow = getLow || get.Rate() < capGets
					delLow = delLow || del.Rate() < capKeys
					keys := res.DataKeys + res.ManifestKeys
					if el := lclk.Now().Sub(start).Seconds(); float64(keys) > capKeys*el+burst*float64(res.DeleteRequests) {
						t.Fatalf("%d keys in %.2fs (fake): above %d keys/s", keys, el, capKeys)
					}
				}
			}
			if st.slowed.Load() == 0 || !getLow || !delLow {
				t.Fatalf("SlowDown answers %d; GET rate lowered %v, delete rate lowered %v: the Lance path was not slowed", st.slowed.Load(), getLow, delLow)
			}
			if lclk.Now().Equal(time.Unix(1e9, 0)) {
				t.Fatal("the limiters never paced a request")
			}
			if err := sameListing(want, listing(t, disk, "wh/")); err != nil {
				t.Fatalf("the throttled cleaner left a different dataset: %v", err)
			}
		})
	}
}

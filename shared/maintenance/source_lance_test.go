package maintenance_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestRunnerMaintainsLanceDataset: a registered Lance dataset (Format
// "lance") is maintained by fleet.Scheduler.Run like any table: pruned through its
// Source (nothing to compact: LanceDB's optimize folded and indexed
// everything; TestRunnerCompactsLanceDataset compacts), its stats and mark recorded; the cleaner drains
// the ranges; LanceDB then reads every retained version exactly as before
// and the latest accepts a write. The next pass with nothing written is
// idle and costs the fleet index (LIST + GET) and one LIST for the dataset
// (inverted names), or one LIST and one HEAD (plain names); a write is
// seen by the scan. The sweep leaves the dataset alone.
func TestRunnerMaintainsLanceDataset(t *testing.T) {
	for _, scheme := range []string{"v2", "v1"} {
		t.Run(scheme, func(t *testing.T) { testRunnerLance(t, scheme) })
	}
}

func testRunnerLance(t *testing.T, scheme string) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	c := lancetest.Create(t, wh, "ds", 20, scheme)
	before := lancetest.Dump(t, wh, "ds")
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	cnt := objstore.NewCounting(store)
	clock := fakeclock.New(time.Now().Add(2 * time.Hour))
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 3, RangeVersions: 4}
	ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Policy: p, Format: formats.Lance}
	cat := &memCatalog{refs: []maintenance.TableRef{ref}}
	q := queue.NewEmbedded(queue.EmbeddedOptions{})
	r := &maintenance.Runner{Store: cnt, Catalog: cat, Locker: lock.NewInProcess(clock), Queue: maintenance.QueueEnqueuer{Q: q},
		Clock: clock, Owner: "test", Sources: formats.Open, KeepAlive: -1}

	// A dry run plans and writes nothing.
	dry := *r
	dry.DryRun = true
	files := listing(t, store, "wh/")
	drep, err := fleetidx.New(&dry, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx)
	if err != nil || len(drep.Tables) != 1 || len(drep.Tables[0].Prune.Ranges) == 0 {
		t.Fatalf("dry run: %+v %v", drep, err)
	}
	if err := sameListing(files, listing(t, store, "wh/")); err != nil {
		t.Fatalf("dry run wrote: %v", err)
	}
	// At the real time every version is in its grace window, counted from
	// its own manifest timestamp: the dry run says so.
	early := dry
	early.Clock = fakeclock.New(time.Now())
	erep, err := fleetidx.New(&early, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx)
	if err != nil || len(erep.Tables) != 1 {
		t.Fatalf("dry run now: %+v %v", erep, err)
	}
	kept := erep.Tables[0].Prune.Kept()
	if len(kept) != 2 || kept[0].From != c.Versions[0].Version || !strings.HasPrefix(kept[0].Reason, "grace until ") ||
		kept[0].To != c.Latest-uint64(p.KeepLast) || kept[1].Reason != "keep-last 3" {
		t.Fatalf("kept now: %+v", kept)
	}

	rep, err := fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx)
	if err != nil || len(rep.Tables) != 1 || rep.Tables[0].Skipped != "" {
		t.Fatalf("run: %+v %v", rep, err)
	}
	tr := rep.Tables[0]
	floor := c.Latest - uint64(p.KeepLast) + 1
	if tr.Prune.Floor != floor || tr.Token == 0 || len(tr.Prune.Ranges) == 0 {
		t.Fatalf("prune plan: floor %d (want %d), token %d, ranges %v", tr.Prune.Floor, floor, tr.Token, tr.Prune.Ranges)
	}
	if tr.Compacted.Planned != 0 || tr.Compacted.Committed != 0 || tr.Compacted.Stopped != "" {
		t.Fatalf("a Lance dataset was compacted: %+v", tr.Compacted)
	}
	latestRows := before.Rows[strconv.FormatUint(c.Latest, 10)]
	if tr.Stats.Rows != uint64(len(latestRows)) || tr.Stats.Fragments == 0 || tr.Stats.Versions != len(c.Versions) ||
		tr.Stats.Unreclaimed != int(floor-c.Versions[0].Version) {
		t.Fatalf("stats %+v (LanceDB reads %d rows; %d versions)", tr.Stats, len(latestRows), len(c.Versions))
	}
	if rep.StatsWritten != 1 || rep.MarksWritten != 1 {
		t.Fatalf("stats written %d, marks %d", rep.StatsWritten, rep.MarksWritten)
	}

	cl := &maintenance.Cleaner{Store: store, Tables: cat, Requeue: maintenance.QueueEnqueuer{Q: q}, Sources: formats.Open,
		OpenOpts: table.Options{Clock: clock}}
	st, err := maintenance.DrainLocal(ctx, q, cl, nil)
	if err != nil || st.Failed > 0 || st.Succeeded < len(tr.Prune.Ranges) {
		t.Fatalf("drain %+v %v", st, err)
	}
	lancetest.CheckRetained(t, before, lancetest.Dump(t, wh, "ds"), lancetest.AtOrAbove(floor, c.Tags))

	// Nothing written: idle, at the scan's cost.
	base := cnt.Counts()
	rep, err = fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx)
	if err != nil || rep.Idle != 1 || len(rep.Tables) != 0 {
		t.Fatalf("second run not idle: %+v %v", rep, err)
	}
	got := cnt.Counts().Sub(base)
	wantCounts := objstore.Counts{List: 2, Get: 1}
	if scheme == "v1" {
		wantCounts.Head = 1
	}
	if got != wantCounts {
		t.Fatalf("idle pass requests %+v, want %+v (fleet index LIST+GET, dataset LIST%s)", got, wantCounts,
			map[bool]string{true: " + HEAD of the next manifest"}[scheme == "v1"])
	}

	// A write is seen by the scan, and maintained once it waited long enough.
	latest := lancetest.Write(t, wh, "ds")
	clock.Advance(p.WithDefaults().CompactMaxWait + time.Minute)
	if _, err := fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(p.WithDefaults().CompactMaxWait + time.Minute)
	rep, err = fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx)
	if err != nil || len(rep.Tables) != 1 || rep.Tables[0].Prune.Latest != latest {
		t.Fatalf("after a write (latest %d): %+v %v", latest, rep, err)
	}

	// The orphan sweep skips the dataset: nothing listed, nothing deleted.
	files = listing(t, store, "wh/")
	sr, err := maintenance.SweepTable(ctx, store, ref, maintenance.SweepOptions{Now: clock.Now().Add(30 * 24 * time.Hour)})
	if err != nil || sr.Skipped == "" || sr.Deleted != 0 {
		t.Fatalf("sweep of a Lance dataset: %+v %v", sr, err)
	}
	if err := sameListing(files, listing(t, store, "wh/")); err != nil {
		t.Fatal(err)
	}
	if d := lancetest.Dump(t, wh, "ds"); d.Versions[len(d.Versions)-1] != latest {
		t.Fatalf("LanceDB versions after the last pass: %v", d.Versions)
	}
}

// TestUnknownFormatDeletesNothing: a table registered with a format no
// opener knows, or a Lance dataset with no opener, fails with
// ErrUnknownFormat in the runner and the cleaner; nothing is written or
// deleted.
func TestUnknownFormatDeletesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	lancetest.Create(t, wh, "ds", 6, "")
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Now().Add(2 * time.Hour))
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1}
	files := listing(t, store, "wh/")
	for _, tc := range []struct {
		format  string
		sources maintenance.SourceOpener
	}{{"delta", formats.Open}, {"lance", nil}} {
		ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Policy: p, Format: tc.format}
		cat := &memCatalog{refs: []maintenance.TableRef{ref}}
		q := queue.NewEmbedded(queue.EmbeddedOptions{})
		r := &maintenance.Runner{Store: store, Catalog: cat, Locker: lock.NewInProcess(clock), Queue: maintenance.QueueEnqueuer{Q: q},
			Clock: clock, Owner: "test", Sources: tc.sources, KeepAlive: -1}
		_, err := r.MaintainTable(ctx, ref)
		if !errors.Is(err, maintenance.ErrUnknownFormat) {
			t.Fatalf("%s: MaintainTable: %v, want ErrUnknownFormat", tc.format, err)
		}
		rep, _ := fleetidx.New(r, fleetidx.Options{IndexRoot: "-"}).Run(ctx)
		if len(rep.Tables) != 1 || !strings.Contains(rep.Tables[0].Skipped, maintenance.ErrUnknownFormat.Error()) {
			t.Fatalf("%s: run %+v", tc.format, rep)
		}
		cl := &maintenance.Cleaner{Store: store, Tables: cat, Requeue: maintenance.QueueEnqueuer{Q: q}, Sources: tc.sources,
			OpenOpts: table.Options{Clock: clock}}
		msg := maintenance.RangeMessage{V: 1, Table: "ds", Root: ref.Root, From: 1, To: 3}
		if _, err := cl.Clean(ctx, msg.Encode()); !errors.Is(err, maintenance.ErrUnknownFormat) || !errors.Is(err, queue.ErrPermanent) {
			t.Fatalf("%s: clean: %v, want a permanent ErrUnknownFormat", tc.format, err)
		}
	}
	if err := sameListing(files, listing(t, store, "wh/")); err != nil {
		t.Fatalf("something was written or deleted: %v", err)
	}
}

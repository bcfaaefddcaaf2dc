package maintenance_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
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

// TestRunnerCompactsLanceDataset: fleet.Scheduler.Run on a registered Lance dataset
// of LanceDB's one-row writes compacts it under the table's lease (one
// Rewrite version, fenced with the lease's token), then prunes: the dry
// run lists the group and writes nothing; after the run and the drain
// LanceDB reads the latest version as before, in fewer fragments, its
// index queries agree with its scan, and the versions the compaction
// superseded are pruned once past the grace window.
func TestRunnerCompactsLanceDataset(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	lancetest.Node(t, nil, nil, "mixed", wh, "ds", "16")
	before := lancetest.Dump(t, wh, "ds")
	latest := before.Versions[len(before.Versions)-1]
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Now().Add(2 * time.Hour))
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1, RangeVersions: 8}
	ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Policy: p, Format: formats.Lance}
	cat := &memCatalog{refs: []maintenance.TableRef{ref}}
	q := queue.NewEmbedded(queue.EmbeddedOptions{})
	r := &maintenance.Runner{Store: store, Catalog: cat, Locker: lock.NewInProcess(clock), Queue: maintenance.QueueEnqueuer{Q: q},
		Clock: clock, Owner: "test", Sources: formats.Open, KeepAlive: -1}

	dry := *r
	dry.DryRun = true
	files := listing(t, store, "wh/")
	drep, err := dry.MaintainTable(ctx, ref)
	if err != nil || len(drep.CompactionGroups) != 1 || drep.Compacted.Planned != 1 {
		t.Fatalf("dry run: %+v %v", drep, err)
	}
	if err := sameListing(files, listing(t, store, "wh/")); err != nil {
		t.Fatalf("dry run wrote: %v", err)
	}

	rep, err := fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx)
	if err != nil || len(rep.Tables) != 1 {
		t.Fatalf("run: %+v %v", rep, err)
	}
	tr := rep.Tables[0]
	if tr.CompactionError != "" || tr.Compacted.Committed != 1 || !slices.Equal(tr.Compacted.Versions, []uint64{latest + 1}) || tr.Compacted.InputFrags < 2 {
		t.Fatalf("compaction: %+v (error %q)", tr.Compacted, tr.CompactionError)
	}
	if tr.Prune.Latest != latest+1 || tr.Prune.Floor != latest+1 || tr.Token == 0 {
		t.Fatalf("prune after the compaction: latest %d floor %d token %d", tr.Prune.Latest, tr.Prune.Floor, tr.Token)
	}
	cl := &maintenance.Cleaner{Store: store, Tables: cat, Requeue: maintenance.QueueEnqueuer{Q: q}, Sources: formats.Open,
		OpenOpts: table.Options{Clock: clock}}
	if st, err := maintenance.DrainLocal(ctx, q, cl, nil); err != nil || st.Failed > 0 {
		t.Fatalf("drain %+v %v", st, err)
	}
	after := lancetest.Dump(t, wh, "ds")
	if !slices.Equal(after.Versions, []uint64{latest + 1}) {
		t.Fatalf("LanceDB lists %v, want only the compaction's version %d", after.Versions, latest+1)
	}
	if got, want := after.Rows[strconv.FormatUint(latest+1, 10)], before.Rows[strconv.FormatUint(latest, 10)]; !slices.Equal(got, want) {
		t.Fatalf("latest reads %v, before %v", got, want)
	}
	var v struct {
		Bad       []any `json:"bad"`
		Fragments int   `json:"fragments"`
	}
	lancetest.Node(t, nil, &v, "verify", wh, "ds")
	if len(v.Bad) > 0 || v.Fragments > 2 {
		t.Fatalf("LanceDB: %+v", v)
	}
}

// TestRunnerComesBackForLanceCompactionLeft: fragments a Lance compaction
// left beyond its run's limits (here MaxInputBytes) are recorded in the
// mark, so the next pass maintains the dataset again with nothing written,
// as for a table; once nothing is left the pass after is idle.
func TestRunnerComesBackForLanceCompactionLeft(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	lancetest.Node(t, nil, nil, "mixed", wh, "ds", "16")
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Now().Add(2 * time.Hour))
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1, CompactMinFragments: 2, MaxInputBytes: 1}
	ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Policy: p, Format: formats.Lance}
	cat := &memCatalog{refs: []maintenance.TableRef{ref}}
	q := queue.NewEmbedded(queue.EmbeddedOptions{})
	r := &maintenance.Runner{Store: store, Catalog: cat, Locker: lock.NewInProcess(clock), Queue: maintenance.QueueEnqueuer{Q: q},
		Clock: clock, Owner: "test", Sources: formats.Open, KeepAlive: -1}
	rep, err := fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx)
	if err != nil || len(rep.Tables) != 1 || rep.Tables[0].Compacted.Committed != 0 {
		t.Fatalf("first run: %+v %v", rep, err)
	}
	clock.Advance(time.Minute)
	rep, err = fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx)
	if err != nil || len(rep.Tables) != 1 || rep.Idle != 0 {
		t.Fatalf("second run should come back for the compaction left: tables %d, idle %d, %v", len(rep.Tables), rep.Idle, err)
	}
	// With the limit lifted the next pass compacts, and the one after is idle.
	cat.refs[0].Policy.MaxInputBytes = 0
	clock.Advance(time.Minute)
	if rep, err = fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx); err != nil || len(rep.Tables) != 1 || rep.Tables[0].Compacted.Committed != 1 {
		t.Fatalf("third run: %+v %v", rep, err)
	}
	clock.Advance(time.Minute)
	if rep, err = fleetidx.New(r, fleetidx.Options{IndexRoot: "wh/"}).Run(ctx); err != nil || rep.Idle != 1 {
		t.Fatalf("fourth run not idle: %+v %v", rep, err)
	}
}

// TestJobCompactsLanceDataset: the fan-out job's path (Runner.MaintainTable,
// what the compactor's SQS job mode runs for one table) compacts a Lance
// dataset under the lease as the inline pass does: one Rewrite version,
// fenced with the lease's token, then the prune of what it superseded;
// LanceDB reads the latest as before, its index queries agree with its
// scan.
func TestJobCompactsLanceDataset(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	lancetest.Node(t, nil, nil, "mixed", wh, "ds", "12")
	before := lancetest.Dump(t, wh, "ds")
	latest := before.Versions[len(before.Versions)-1]
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Now().Add(2 * time.Hour))
	ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Policy: maintenance.Policy{Grace: time.Hour, KeepLast: 1, RangeVersions: 8}, Format: formats.Lance}
	q := queue.NewEmbedded(queue.EmbeddedOptions{})
	r := &maintenance.Runner{Store: store, Catalog: &memCatalog{refs: []maintenance.TableRef{ref}}, Locker: lock.NewInProcess(clock), Queue: maintenance.QueueEnqueuer{Q: q},
		Clock: clock, Owner: "test", Sources: formats.Open, KeepAlive: -1}
	tr, err := r.MaintainTable(ctx, ref)
	if err != nil || tr.CompactionError != "" || tr.Compacted.Committed != 1 || !slices.Equal(tr.Compacted.Versions, []uint64{latest + 1}) || tr.Token == 0 {
		t.Fatalf("job: %+v %v", tr, err)
	}
	if tr.Prune.Latest != latest+1 || len(tr.Prune.Ranges) == 0 {
		t.Fatalf("prune after the compaction: %+v", tr.Prune)
	}
	after := lancetest.Dump(t, wh, "ds")
	if got, want := after.Rows[strconv.FormatUint(latest+1, 10)], before.Rows[strconv.FormatUint(latest, 10)]; !slices.Equal(got, want) {
		t.Fatalf("latest reads %v, before %v", got, want)
	}
	var v struct {
		Bad       []any `json:"bad"`
		Fragments int   `json:"fragments"`
	}
	lancetest.Node(t, nil, &v, "verify", wh, "ds")
	if len(v.Bad) > 0 || v.Fragments > 2 {
		t.Fatalf("LanceDB: %+v", v)
	}
}

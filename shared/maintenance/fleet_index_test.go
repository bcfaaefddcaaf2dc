package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// addTable creates and registers one more table of the fleet.
func (f *fleet) addTable(t testing.TB, name string, p maintenance.Policy) {
	t.Helper()
	ref := maintenance.TableRef{Name: name, Root: "wh/" + name + "/", Policy: p}
	tb, err := table.Create(context.Background(), f.store, ref.Root, kvSchema, "name", f.opts(p))
	if err != nil {
		t.Fatal(err)
	}
	f.tables[name] = tb
	f.cat.refs = append(f.cat.refs, ref)
}

// sameShard returns n table names whose marks share one index shard.
func sameShard(n int) []string {
	out := []string{"s0"}
	want := fleetidx.ShardOf(out[0], fleetidx.Shards)
	for i := 1; len(out) < n; i++ {
		if name := fmt.Sprintf("s%d", i); fleetidx.ShardOf(name, fleetidx.Shards) == want {
			out = append(out, name)
		}
	}
	return out
}

// indexObjects lists the fleet index's objects (everything under
// wh/_fleet/ but the fan-out's retry markers and inline-run records).
func indexObjects(t testing.TB, st objstore.Store) []string {
	t.Helper()
	var out []string
	err := objstore.ListAll(context.Background(), st, "wh/_fleet/", "", func(o objstore.ObjectInfo) error {
		if !strings.HasPrefix(o.Key, "wh/_fleet/retry/") && !strings.HasPrefix(o.Key, "wh/_fleet/inline-run") {
			out = append(out, o.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 19 item 5, "index writes on a stale base are silently lost": a
// scan reads the index, four maintenances of tables of the same shard
// write it, then RecordScan writes the scan's updates. The write must land
// in the newest object (or be retried until it does): the changed table's
// first-change time must be readable, or its CompactMaxWait bound never
// runs out.
func TestFleetIndexWriteOnStaleBaseIsNotLost(t *testing.T) {
	ctx := context.Background()
	p := maintenance.DefaultPolicy()
	f := newFleet(t, 0, p, nil)
	names := sameShard(5)
	for _, n := range names {
		f.addTable(t, n, p)
	}
	f.pass(t) // every table gets a mark
	f.clock.Advance(15 * time.Minute)
	target := names[0]
	f.write(t, target, 1) // one fragment: below the threshold, waits
	sc, err := fleetidx.New(f.runner, f.scan).Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names[1:] {
		f.clock.Advance(time.Second)
		f.write(t, n, 10+i)
		if _, err := fleetidx.New(f.runner, f.scan).MaintainNamed(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := fleetidx.New(f.runner, f.scan).RecordScan(ctx, sc); err != nil {
		t.Fatal(err)
	}
	idx, err := fleetidx.Read(ctx, f.cnt, "wh/")
	if err != nil {
		t.Fatal(err)
	}
	m := idx.Tables[target]
	if m.ChangedAt.IsZero() || m.Seen == 0 {
		t.Fatalf("the scan's update of %s was lost (written on a stale base): %+v", target, m)
	}
	for _, n := range names[1:] {
		if mm := idx.Tables[n]; mm.Checked.Before(sc.At) {
			t.Fatalf("mark of %s lost: %+v", n, mm)
		}
	}
}

// Issue 19 items 5 and 7: an unreadable newest index object (a key sorting
// before the digits, a damaged object) is stepped over or replaced: after
// one pass in need the tables are idle again; and objects left by failed
// deletes are cleaned by later writers (bounded).
func TestFleetIndexStraysAndDamageRepaired(t *testing.T) {
	ctx := context.Background()
	p := maintenance.DefaultPolicy()
	f := newFleet(t, 0, p, nil)
	names := sameShard(3)
	for _, n := range names {
		f.addTable(t, n, p)
	}
	f.pass(t)
	// Strays: a key sorting before the digits at the top of the index
	// folder, and inside the shards' folder.
	idx, err := fleetidx.Read(ctx, f.store, "wh/")
	if err != nil || idx.Layout.N != 1 {
		t.Fatalf("index of %d tables: layout %+v, %v; want 1 shard", len(names), idx.Layout, err)
	}
	for _, k := range []string{"wh/_fleet/!console", "wh/_fleet/index/!x", fleetidx.ShardPrefix("wh/", idx.Layout, 0) + "!x", fleetidx.ShardPrefix("wh/", idx.Layout, 0)[:len("wh/_fleet/index/")+21] + "!x"} {
		if err := f.store.Put(ctx, k, []byte("stray")); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(15 * time.Minute)
	if rep, _ := f.pass(t); len(rep.Tables) != 0 || rep.Idle != len(names) {
		t.Fatalf("with strays in _fleet/: maintained %v, idle %d (index %q)", maintained(rep), rep.Idle, rep.Scan.IndexError)
	}
	// Damage every index object.
	for _, k := range indexObjects(t, f.store) {
		if strings.HasSuffix(k, ".json") {
			if err := f.store.Put(ctx, k, []byte("{not json")); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.clock.Advance(15 * time.Minute)
	if rep, _ := f.pass(t); len(rep.Tables) != len(names) {
		t.Fatalf("damaged index: maintained %v, want every table", maintained(rep))
	}
	f.clock.Advance(15 * time.Minute)
	if rep, _ := f.pass(t); len(rep.Tables) != 0 || rep.Idle != len(names) {
		t.Fatalf("after the pass that found the index damaged: maintained %v, idle %d (index %q): not repaired", maintained(rep), rep.Idle, rep.Scan.IndexError)
	}
}

// noDelete fails every Delete under prefix while on: a delete that fails.
type noDelete struct {
	objstore.Store
	prefix string
	on     atomic.Bool
}

func (s *noDelete) Delete(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if s.on.Load() && strings.HasPrefix(k, s.prefix) {
			return errors.New("injected delete failure")
		}
	}
	return s.Store.Delete(ctx, keys)
}

// Issue 19 item 7: index objects left by failed deletes (or a crash
// between a put and its delete) do not stay for ever: once deletes work
// again, the next writes of the shard remove them, and the index holds at
// most two objects per shard (the newest and the one below).
func TestFleetIndexLeftoversCleaned(t *testing.T) {
	p := maintenance.DefaultPolicy()
	var nd *noDelete
	f := newFleet(t, 0, p, func(s objstore.Store) objstore.Store { nd = &noDelete{Store: s, prefix: "wh/_fleet/"}; return nd })
	names := sameShard(2)
	for _, n := range names {
		f.addTable(t, n, p)
	}
	nd.on.Store(true)
	for i := range 10 {
		f.clock.Advance(15 * time.Minute)
		for _, n := range names {
			f.write(t, n, i)
		}
		f.scan.Everything = true // a write of the index every pass
		f.pass(t)
	}
	if n := len(indexObjects(t, f.store)); n < 8 {
		t.Fatalf("with deletes failing, only %d index objects: the test does not leave leftovers", n)
	}
	nd.on.Store(false)
	for i := range 2 {
		f.clock.Advance(15 * time.Minute)
		f.write(t, names[0], 100+i)
		f.pass(t)
	}
	if objs := indexObjects(t, f.store); len(objs) > 4 {
		t.Fatalf("%d index objects left after deletes work again (one shard): %v", len(objs), objs)
	}
}

// Issue 19 item 5, "a standing compaction error backs off pruning too": a
// table whose compaction always fails (its data files are unreadable) and
// which is written once a minute keeps being pruned on pruning's own
// bounds, while its compaction alone backs off (tried at most every
// FailureBackoff x 2^(k-1)): over 8 h its stored versions stay bounded
// (482 before: the whole table backed off up to 6 h).
func TestFleetCompactionFailureBacksOffCompactionOnly(t *testing.T) {
	ctx := context.Background()
	p := maintenance.Policy{KeepLast: 3, Grace: time.Hour}.WithDefaults()
	f := newFleet(t, 2, p, func(s objstore.Store) objstore.Store {
		return &failGet{Store: s, prefix: "wh/t000/" + table.DataPrefix}
	})
	var tries []time.Time
	maxVersions := 0
	for pass := 0; pass < 32; pass++ {
		for m := 0; m < 15; m++ {
			f.clock.Advance(time.Minute)
			for name := range f.tables {
				f.write(t, name, pass*15+m)
			}
		}
		rep, _ := f.pass(t)
		for _, tr := range rep.Tables {
			if tr.Table == "t000" && tr.CompactionError != "" {
				tries = append(tries, f.clock.Now())
			}
			if tr.Table == "t000" && strings.HasPrefix(tr.Skipped, "error:") {
				t.Fatalf("pass %d: t000 failed as a whole: %s", pass, tr.Skipped)
			}
		}
		if _, err := maintenance.DrainLocal(ctx, f.q, f.clean, discard); err != nil {
			t.Fatal(err)
		}
		vs := storedVersions(t, f.tables["t000"])
		maxVersions = max(maxVersions, len(vs))
	}
	t.Logf("t000: compaction tried %d times in 8 h; at most %d versions stored", len(tries), maxVersions)
	// The grace window (1 h) holds ~60 versions, plus the passes of writes
	// before the next maintenance: the healthy table's bound.
	if maxVersions > 160 {
		t.Fatalf("t000 held %d versions: pruning backed off with its compaction", maxVersions)
	}
	if len(tries) < 3 || len(tries) > 8 {
		t.Fatalf("compaction of t000 tried %d times in 32 passes, want a growing backoff: %v", len(tries), tries)
	}
	for i := 2; i < len(tries); i++ {
		if tries[i].Sub(tries[i-1]) < tries[i-1].Sub(tries[i-2]) {
			t.Fatalf("compaction backoff shrank: %v", tries)
		}
	}
}

// failGet fails every GET under prefix.
type failGet struct {
	objstore.Store
	prefix string
}

func (s *failGet) Get(ctx context.Context, k string) ([]byte, error) {
	if strings.HasPrefix(k, s.prefix) {
		return nil, errBroken
	}
	return s.Store.Get(ctx, k)
}

// racingWrite commits one row to a table on the first version listing
// (LIST of _versions/ beyond max-keys 1) after it is armed: a write that
// lands between a maintenance's last compaction commit and its prune
// plan's listing.
type racingWrite struct {
	objstore.Store
	prefix string
	armed  atomic.Bool
	write  func()
}

func (s *racingWrite) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	if o.Prefix == s.prefix && o.MaxKeys != 1 && s.armed.CompareAndSwap(true, false) {
		s.write()
	}
	return s.Store.List(ctx, o)
}

// Issue 19 item 5: a write between a pass's last compaction commit and its
// version listing must not hide the table until its full check: the
// mark's version and fragment count come from one manifest, so the next
// scans see the change and maintain the table within CompactMaxWait + T.
func TestFleetWriteDuringMaintenanceIsSeen(t *testing.T) {
	p := maintenance.DefaultPolicy()
	var rw *racingWrite
	f := newFleet(t, 1, p, func(s objstore.Store) objstore.Store {
		rw = &racingWrite{Store: s, prefix: "wh/t000/" + table.VersionsPrefix}
		return rw
	})
	for i := range p.CompactMinFragments + 2 {
		f.write(t, "t000", i)
	}
	rw.write = func() { f.write(t, "t000", 999) }
	rw.armed.Store(true)
	rep, _ := f.pass(t)
	if len(rep.Tables) != 1 || rep.Tables[0].Compacted.Committed == 0 || rw.armed.Load() {
		t.Fatalf("the pass did not compact with a racing write: %+v", rep.Tables)
	}
	start := f.clock.Now()
	for f.clock.Now().Sub(start) <= p.CompactMaxWait+15*time.Minute {
		f.clock.Advance(15 * time.Minute)
		if rep, _ := f.pass(t); len(rep.Tables) == 1 {
			return
		}
	}
	t.Fatalf("the row written during the maintenance was not seen within CompactMaxWait + T (%s)", p.CompactMaxWait+15*time.Minute)
}

// A warehouse upgraded from the single-object index (format 1) keeps its
// marks: the first scan reads the old object, its index write moves the
// marks into the shards and deletes the old object; no table is maintained
// for want of a mark.
func TestFleetIndexUpgradeFromSingleObject(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, 5, maintenance.DefaultPolicy(), nil)
	f.pass(t)
	idx, err := fleetidx.Read(ctx, f.store, "wh/")
	if err != nil || len(idx.Tables) != 5 {
		t.Fatalf("index %v, %v", idx, err)
	}
	old := map[string]any{"v": 1, "seq": 7, "written": f.clock.Now(), "tables": idx.Tables}
	b, _ := json.Marshal(old)
	if _, err := objstore.DeleteAll(ctx, f.store, indexObjects(t, f.store), 1000); err != nil {
		t.Fatal(err)
	}
	legacy := fmt.Sprintf("wh/_fleet/%020d.json", uint64(math.MaxUint64-7))
	if err := f.store.Put(ctx, legacy, b); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(15 * time.Minute)
	if rep, _ := f.pass(t); len(rep.Tables) != 0 || rep.Idle != 5 {
		t.Fatalf("first pass after the upgrade maintained %v (idle %d): the old marks were not read", maintained(rep), rep.Idle)
	}
	objs := indexObjects(t, f.store)
	for _, k := range objs {
		if k == legacy {
			t.Fatalf("the old index object was not deleted: %v", objs)
		}
	}
	f.clock.Advance(15 * time.Minute)
	if rep, _ := f.pass(t); len(rep.Tables) != 0 || rep.Idle != 5 {
		t.Fatalf("second pass after the upgrade maintained %v: the marks were not moved into the shards", maintained(rep))
	}
}

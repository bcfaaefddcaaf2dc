package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// leasePass is one maintenance pass of the long-reader tests: compact and
// prune (MaintainTable), drain the cleanup queue, sweep.
func leasePass(t *testing.T, e *env, tb *table.Table) maintenance.TableReport {
	t.Helper()
	ctx := context.Background()
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	if err != nil {
		t.Fatalf("maintain: %v", err)
	}
	e.drain(t)
	if _, err := maintenance.Sweep(ctx, tb, e.ref.Policy, e.clock.Now(), 0, false); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	return rep
}

// TestLongReaderKeepsItsVersion: a reader checks out version V and takes a
// 30-minute lease on it, renewed as it goes; it scans V for 3 simulated
// hours (grace 1 h) while writes continue and a pass (compact, prune,
// drain, sweep) runs every 15 minutes. Every scan returns exactly V's
// rows; the floor never passes V; one pass after Release, V is pruned.
// Without the lease V's files are deleted after grace + margin (the scan
// fails: checked before the planner honoured leases).
func TestLongReaderKeepsItsVersion(t *testing.T) {
	ctx := context.Background()
	p := testPolicy() // KeepLast 3, grace 1h
	e, _ := newTimedEnv(t, p)
	tb := e.create(t)
	model := map[string]string{}
	for i := range 6 { // six fragments: compaction rewrites them
		k, v := fmt.Sprint("k", i), "0"
		upsert(t, tb, k, v)
		model[k] = v
	}
	snap, err := tb.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	V := snap.Version()
	const ttl = 30 * time.Minute
	lease, err := snap.Lease(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	compacted, held := 0, 0
	for step := 1; step <= 12; step++ { // 12 x 15 min = 3 h
		for i := range 3 {
			upsert(t, tb, fmt.Sprint("k", (step+i)%8), fmt.Sprint(step))
		}
		e.clock.Advance(15 * time.Minute)
		if err := lease.RenewDue(ctx, ttl); err != nil {
			t.Fatalf("step %d: renew: %v", step, err)
		}
		rep := leasePass(t, e, tb)
		compacted += rep.Compacted.InputFrags
		if rep.Prune.Floor > V {
			t.Fatalf("step %d: floor %d above the leased version %d", step, rep.Prune.Floor, V)
		}
		if by := rep.Prune.Leased.By; by != nil {
			if by.ID != lease.ID() || by.Version != V {
				t.Fatalf("step %d: held by %+v", step, by)
			}
			held++
		}
		rows, err := scanSnap(ctx, snap)
		if err != nil {
			t.Fatalf("step %d (%s): scan of leased version %d: %v", step, time.Duration(step)*15*time.Minute, V, err)
		}
		if err := diffRows(rows, model); err != nil {
			t.Fatalf("step %d: version %d: %v", step, V, err)
		}
	}
	if compacted == 0 || held == 0 {
		t.Fatalf("compacted %d fragments, floor held by the lease in %d passes: the test did not exercise both", compacted, held)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	upsert(t, tb, "after", "release")
	e.clock.Advance(15 * time.Minute)
	rep := leasePass(t, e, tb)
	if rep.Prune.Floor <= V || slices.Contains(storedVersions(t, tb), V) {
		t.Fatalf("one pass after release: floor %d, versions %v: version %d not pruned", rep.Prune.Floor, storedVersions(t, tb), V)
	}
	if _, err := tb.Checkout(ctx, V); !errors.Is(err, table.ErrVersionPruned) {
		t.Fatalf("checkout of the released version: %v", err)
	}
}

// TestCrashedReaderLeaseExpires: a reader takes a 2-hour lease on V and
// crashes (no renewal, no release). V is kept while now <= expiry +
// MaxClockSkew, and pruned by the first pass past it: a pass exactly at
// the bound keeps it, one 1 ms later prunes it. The expired name is
// deleted by that pass.
func TestCrashedReaderLeaseExpires(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, _ := newTimedEnv(t, p)
	tb := e.create(t)
	upsert(t, tb, "a", "1")
	V := tb.Cached().Version
	const ttl = 2 * time.Hour
	lease, err := tb.Lease(ctx, V, ttl)
	if err != nil {
		t.Fatal(err)
	}
	bound := lease.Expires().Add(table.MaxClockSkew)
	for e.clock.Now().Add(15 * time.Minute).Before(bound) {
		upsert(t, tb, "b", e.clock.Now().String())
		e.clock.Advance(15 * time.Minute)
		if rep := leasePass(t, e, tb); rep.Prune.Floor > V {
			t.Fatalf("%s before the bound: floor %d above the leased %d", bound.Sub(e.clock.Now()), rep.Prune.Floor, V)
		}
	}
	upsert(t, tb, "b", "last")
	e.clock.Advance(bound.Sub(e.clock.Now()))
	rep := leasePass(t, e, tb)
	if rep.Prune.Floor != V || rep.Prune.Leased.By == nil || !slices.Contains(storedVersions(t, tb), V) {
		t.Fatalf("at expiry + MaxClockSkew: floor %d (want %d, held by %+v), versions %v", rep.Prune.Floor, V, rep.Prune.Leased.By, storedVersions(t, tb))
	}
	e.clock.Advance(time.Millisecond)
	rep = leasePass(t, e, tb)
	if rep.Prune.Floor <= V || slices.Contains(storedVersions(t, tb), V) {
		t.Fatalf("1 ms past expiry + MaxClockSkew: floor %d, versions %v: %d not pruned", rep.Prune.Floor, storedVersions(t, tb), V)
	}
	if set, err := tb.Leases(ctx); err != nil || len(set.Names) != 0 {
		t.Fatalf("expired lease name not deleted by the pass: %+v %v", set.Names, err)
	}
	// Renewing the crashed reader's lease now: the floor passed V.
	if err := lease.Renew(ctx, ttl); !errors.Is(err, table.ErrVersionPruned) {
		t.Fatalf("renewal after the floor passed: %v, want ErrVersionPruned", err)
	}
	if set, _ := tb.Leases(ctx); len(set.Names) != 0 {
		t.Fatalf("a refused renewal left %+v", set.Names)
	}
}

// TestBadLeasesPinNothingBeyondBounds: malformed names and bodies pin
// nothing; a name claiming a version in the future or an expiry in the
// year 9999 pins no more than its bounds (the latest is kept anyway; the
// forged expiry ends MaxLeaseTTL + MaxClockSkew after the object was
// written); too many lease objects stop the floor, with a clear error.
func TestBadLeasesPinNothingBeyondBounds(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, ts := newTimedEnv(t, p)
	tb := e.create(t)
	upsert(t, tb, "a", "1") // v2
	dir := tb.LeaseDir().Dir
	put := func(name, body string) {
		t.Helper()
		if err := ts.Put(ctx, dir+name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	put("garbage", "x")
	put("00000000000000000002-99999999999999999999-00000000000000aa", "")       // expiry out of range
	put(table.LeaseName(2, far, "00000000000000bb")[:30], "")                   // truncated
	put(table.LeaseName(1<<40, far, "00000000000000cc"), "{not json")           // future version, forged expiry
	put(table.LeaseName(2, far, "00000000000000dd"), `{"version": "nonsense"}`) // forged expiry on v2
	written := e.clock.Now()
	for range 5 {
		upsert(t, tb, "b", "x")
	}
	// Within the forged lease's bound: v2 is held.
	e.clock.Advance(24 * time.Hour)
	rep := leasePass(t, e, tb)
	if rep.Prune.Floor != 2 || rep.Prune.Leased.By == nil || rep.Prune.Leased.By.ID != "00000000000000dd" {
		t.Fatalf("forged lease within its bound: floor %d, held by %+v", rep.Prune.Floor, rep.Prune.Leased.By)
	}
	// Past MaxLeaseTTL + 2 x MaxClockSkew after it was written: nothing.
	e.clock.Advance(written.Add(table.MaxLeaseTTL + 2*table.MaxClockSkew + time.Millisecond).Sub(e.clock.Now()))
	upsert(t, tb, "c", "x")
	rep = leasePass(t, e, tb)
	if rep.Prune.Leased.By != nil || rep.Prune.Floor <= 2 {
		t.Fatalf("forged lease past its bound: floor %d, held by %+v", rep.Prune.Floor, rep.Prune.Leased.By)
	}
	if set, err := tb.Leases(ctx); err != nil || len(set.Names)+len(set.Malformed) != 0 {
		t.Fatalf("stale and malformed names not deleted: %+v %+v %v", set.Names, set.Malformed, err)
	}
	// A flood of lease objects beyond the listing's bound (issue 29 item 6:
	// 4,001 no longer stop it, TestUnparseableLeaseNamesPinNothing): the
	// planner refuses to raise the floor.
	flood := &floodStore{Store: e.faulty, prefix: dir, at: e.clock.Now(), n: table.MaxLeaseObjects + 1}
	e.runner.Store = flood
	upsert(t, tb, "d", "x")
	e.clock.Advance(2 * time.Hour)
	before := rep.Prune.Floor
	_, err := e.runner.MaintainTable(ctx, e.ref)
	if !errors.Is(err, table.ErrTooManyLeases) {
		t.Fatalf("maintain with a lease flood: %v, want ErrTooManyLeases", err)
	}
	if f, _ := tb.Floor(ctx); f != before {
		t.Fatalf("floor moved from %d to %d with leases unknown", before, f)
	}
	// Once the flood is old (malformed names past MaxLeaseTTL + skew), the
	// failing passes delete it, 1,000 names a pass, and pruning resumes.
	e.clock.Advance(table.MaxLeaseTTL + time.Hour)
	upsert(t, tb, "e", "x")
	if _, err := e.runner.MaintainTable(ctx, e.ref); !errors.Is(err, table.ErrTooManyLeases) {
		t.Fatalf("first pass over the old flood: %v", err)
	}
	rep, err = e.runner.MaintainTable(ctx, e.ref)
	if err != nil || rep.Prune.Floor <= before {
		t.Fatalf("second pass over the old flood: floor %d (was %d), %v", rep.Prune.Floor, before, err)
	}
	if left := flood.left(); left != table.MaxLeaseObjects+1-2000 {
		t.Fatalf("after two passes: %d malformed left, want %d", left, table.MaxLeaseObjects+1-2000)
	}
}

// floodStore lists n - lo synthetic malformed names under prefix, dated
// at, beside the inner store's objects; deleting them (in listing order)
// removes them.
type floodStore struct {
	objstore.Store
	prefix string
	at     time.Time
	mu     sync.Mutex
	lo, n  int // flood-{lo..n-1} exist
}

func (s *floodStore) name(i int) string { return fmt.Sprintf("%sflood-%07d", s.prefix, i) }

func (s *floodStore) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n - s.lo
}

func (s *floodStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	if opts.Prefix != s.prefix {
		return s.Store.List(ctx, opts)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.lo
	var j int
	if _, err := fmt.Sscanf(strings.TrimPrefix(opts.StartAfter, s.prefix), "flood-%07d", &j); err == nil {
		i = max(i, j+1)
	}
	var p objstore.ListPage
	for ; i < s.n && len(p.Objects) < objstore.MaxListKeys; i++ {
		p.Objects = append(p.Objects, objstore.ObjectInfo{Key: s.name(i), LastModified: s.at})
	}
	p.Truncated = i < s.n
	return p, nil
}

func (s *floodStore) Delete(ctx context.Context, keys []string) error {
	s.mu.Lock()
	for _, k := range keys {
		if s.lo < s.n && k == s.name(s.lo) {
			s.lo++
		}
	}
	s.mu.Unlock()
	return s.Store.Delete(ctx, keys)
}

// TestLeaseRequests pins what leases cost: an idle table's pass (floor
// unchanged) makes no lease request; a pass that raises the floor makes
// one LIST more (the lease listing), plus one DELETE when it saw stale
// names; taking a lease is 3 LISTs at once (versions, floor, leases),
// one PUT and one LIST (the floor); a continuous renewal is one PUT (and
// from the second on, one DELETE of the name before the previous).
func TestLeaseRequests(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, _ := newTimedEnv(t, p)
	tb := e.create(t)
	for i := range 5 {
		upsert(t, tb, fmt.Sprint("k", i), "1")
	}
	leases := newPrefixCounting(e.faulty, tb.Root()+table.LeasesPrefix)
	e.runner.Store = leases
	e.clock.Advance(2 * time.Hour)
	rep := leasePass(t, e, tb)
	if rep.Prune.Floor <= rep.Prune.OldFloor {
		t.Fatalf("floor did not rise: %d", rep.Prune.Floor)
	}
	if got := leases.c.Counts(); got != (objstore.Counts{List: 1}) {
		t.Fatalf("pass raising the floor: lease requests %v, want 1 LIST", got)
	}
	for i := range 3 { // the floor stays (no new version past the grace)
		base := leases.c.Counts()
		e.clock.Advance(15 * time.Minute)
		rep := leasePass(t, e, tb)
		if rep.Prune.Floor != rep.Prune.OldFloor {
			t.Fatalf("pass %d raised the floor", i)
		}
		if got := leases.c.Counts().Sub(base); got != (objstore.Counts{}) {
			t.Fatalf("pass %d with the floor unchanged: lease requests %v, want none", i, got)
		}
	}
	// Taking and renewing, through a counting store.
	cnt := objstore.NewCounting(e.faulty)
	rt, err := table.Open(ctx, cnt, e.ref.Root, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	base := cnt.Counts()
	l, err := rt.Lease(ctx, rt.Cached().Version, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := cnt.Counts().Sub(base); got != (objstore.Counts{List: 4, Put: 1}) {
		t.Fatalf("taking a lease: %v, want 4 LIST 1 PUT", got)
	}
	for i, want := range []objstore.Counts{{Put: 1}, {Put: 1, DeleteRequests: 1, DeleteKeys: 1}} {
		base = cnt.Counts()
		e.clock.Advance(10 * time.Minute)
		if err := l.Renew(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		if got := cnt.Counts().Sub(base); got != want {
			t.Fatalf("renewal %d: %v, want %v", i+1, got, want)
		}
	}
	// A pass that raises the floor while a stale name exists: LIST + DELETE.
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.faulty.Put(ctx, tb.Root()+table.LeasesPrefix+table.LeaseName(1, e.clock.Now().Add(-time.Hour), "00000000000000ee"), nil); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		upsert(t, tb, "x", "y")
	}
	e.clock.Advance(2 * time.Hour)
	base = leases.c.Counts()
	if rep := leasePass(t, e, tb); rep.Prune.Floor <= rep.Prune.OldFloor || rep.Prune.Leased.Stale != 1 {
		t.Fatalf("floor %d -> %d, stale %d", rep.Prune.OldFloor, rep.Prune.Floor, rep.Prune.Leased.Stale)
	}
	if got := leases.c.Counts().Sub(base); got != (objstore.Counts{List: 1, DeleteRequests: 1, DeleteKeys: 1}) {
		t.Fatalf("raising pass with a stale name: %v, want 1 LIST 1 DELETE", got)
	}
}

// TestLeasedIdleTableStaysIdle: in a fleet pass, a table whose floor a
// lease holds back is not maintained again at every pass (its held
// versions are not "prunable" before the lease's expiry + MaxClockSkew):
// idle, it costs the scan's one LIST per pass (beside the fleet index's
// LIST and GET) until then, and is
// maintained (and pruned) at the first pass after it.
func TestLeasedIdleTableStaysIdle(t *testing.T) {
	ctx := context.Background()
	p := maintenance.DefaultPolicy()
	f := newFleet(t, 1, p, nil)
	tb := f.tables["t000"]
	for i := range 5 {
		f.write(t, "t000", i)
	}
	const ttl = 4 * time.Hour
	lease, err := tb.Lease(ctx, tb.Cached().Version, ttl)
	if err != nil {
		t.Fatal(err)
	}
	V := lease.Version()
	for i := range 40 {
		f.write(t, "t000", 100+i)
	}
	maintained := 0
	bound := lease.Expires().Add(table.MaxClockSkew)
	var lastHeld time.Time
	for pass := 0; f.clock.Now().Before(bound.Add(time.Hour)); pass++ {
		f.clock.Advance(15 * time.Minute)
		rep, cnt := f.pass(t)
		if len(rep.Tables) == 0 {
			// The fleet index (LIST + GET) and the table's scan LIST.
			if cnt != (objstore.Counts{List: 2, Get: 1}) {
				t.Fatalf("pass %d skipped the table with %v, want the idle cost (2 LIST 1 GET)", pass, cnt)
			}
			continue
		}
		maintained++
		fl := rep.Tables[0].Prune.Floor
		if f.clock.Now().After(bound) {
			if fl <= V {
				t.Fatalf("pass %d after the lease's bound: floor %d", pass, fl)
			}
			break
		}
		if fl > V {
			t.Fatalf("pass %d: floor %d above the leased %d", pass, fl, V)
		}
		if rep.Tables[0].Prune.Leased.By != nil {
			lastHeld = f.clock.Now()
		}
	}
	t.Logf("maintained %d times over %s; last held at %s", maintained, ttl+time.Hour, lastHeld)
	if lastHeld.IsZero() {
		t.Fatal("the lease never held the floor")
	}
	// Maintained when the lease first held (the versions past grace), once
	// after its bound, and at most once more (the full check or the
	// compaction threshold): not at every one of the ~20 passes.
	if maintained > 4 {
		t.Fatalf("maintained %d times while the lease held: the held versions make the table due at every pass", maintained)
	}
}

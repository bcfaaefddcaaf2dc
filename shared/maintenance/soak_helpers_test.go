package maintenance_test

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The soak is a discrete-event simulation: every actor (writers,
// maintainers, cleaners, the sweep) runs in the test goroutine when its
// event is due, and the fake clock moves only between events or inside a
// store hook that models a stall (which runs the events falling due during
// the stall before letting the stalled request go on). Nothing depends on
// the Go scheduler, so the verdict is the same on every run.

// soakEvent is one scheduled action.
type soakEvent struct {
	at   time.Time
	seq  int
	name string
	fn   func()
}

type soakEvents []*soakEvent

func (q soakEvents) Len() int { return len(q) }
func (q soakEvents) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q soakEvents) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *soakEvents) Push(x any)   { *q = append(*q, x.(*soakEvent)) }
func (q *soakEvents) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// soakViolations collects invariant violations by invariant, keeping the
// first few messages of each and counting the rest.
type soakViolations struct {
	order []string
	msgs  map[string][]string
	count map[string]int
}

const soakKeepPerInvariant = 12

func (v *soakViolations) add(inv, msg string) {
	if v.msgs == nil {
		v.msgs, v.count = map[string][]string{}, map[string]int{}
	}
	if _, ok := v.count[inv]; !ok {
		v.order = append(v.order, inv)
	}
	v.count[inv]++
	if len(v.msgs[inv]) < soakKeepPerInvariant {
		v.msgs[inv] = append(v.msgs[inv], msg)
	}
}

// soakInvariants describes each invariant in the failure report.
var soakInvariants = map[string]string{
	"rows":      "the latest version equals the writers' model",
	"retained":  "every retained version opens and reads the model at that version",
	"floor":     "the retention floor never decreases",
	"pass":      "maintenance passes succeed; pruning runs whatever compaction did",
	"manifests": "no manifest below the floor older than ReplanAfter + one pass",
	"files":     "no unreferenced data/deletion file older than grace + SafetyMargin",
	"writer":    "writers' ops succeed (only a stalled op may end in ErrStaleRead)",
	"sweep":     "orphan sweeps succeed",
	"cleanup":   "cleanup drains succeed",
	"tag":       "tag and untag succeed",
	"scenario":  "the scenario was exercised as configured",
}

// soakWriter is one writer: its own handle on its own fault-injecting view
// of the store.
type soakWriter struct {
	id     int
	h      *table.Table
	faulty *objstore.Faulty
	rng    *rand.Rand
	n      int
	busy   bool // in a stalled op
}

// dropEnqueuer loses 1 in every `oneIn` cleanup messages (seeded), never a
// message whose range overlaps one lost before: each loss is one lost
// message, recoverable within the stated bound.
type dropEnqueuer struct {
	next    maintenance.Enqueuer
	rng     *rand.Rand
	oneIn   int
	lost    []maintenance.RangeMessage
	sent    int
	dropped int
	onDrop  func(maintenance.RangeMessage)
}

func (d *dropEnqueuer) Send(ctx context.Context, bodies [][]byte) error {
	var keep [][]byte
	for _, b := range bodies {
		m, err := maintenance.DecodeRangeMessage(b)
		drop := err == nil && d.oneIn > 0 && d.rng.IntN(d.oneIn) == 0
		for _, l := range d.lost {
			if drop && m.From <= l.To && l.From <= m.To {
				drop = false
			}
		}
		if drop {
			d.lost = append(d.lost, m)
			d.dropped++
			if d.onDrop != nil {
				d.onDrop(m)
			}
			continue
		}
		d.sent++
		keep = append(keep, b)
	}
	if len(keep) == 0 {
		return nil
	}
	return d.next.Send(ctx, keep)
}

// checkHookLocker calls onCheck after every Check (the fence's lock check).
type checkHookLocker struct {
	lock.Locker
	onCheck func(err error)
}

func (c *checkHookLocker) Check(ctx context.Context, l *lock.Lease) error {
	err := c.Locker.Check(ctx, l)
	if c.onCheck != nil {
		c.onCheck(err)
	}
	return err
}

// noGroups plans no compaction (master-2 only plans pruning).
type noGroups struct{}

func (noGroups) Plan(m *table.Manifest, p maintenance.Policy) maintenance.CompactionPlan {
	return maintenance.CompactionPlan{Version: m.Version}
}

type soakWorld struct {
	t   *testing.T
	cfg soakConfig
	ctx context.Context

	clock  *fakeclock.Clock
	disk   objstore.Store
	ts     *fakeclock.Store // dates objects by the fake clock
	m1st   *objstore.Faulty // master-1's store
	locker *lock.InProcess
	q      *queue.Embedded
	cat    *memCatalog
	ref    maintenance.TableRef
	m1     *maintenance.Runner
	clean  *maintenance.Cleaner
	drop   *dropEnqueuer

	events soakEvents
	seq    int
	end    time.Time

	writers []*soakWriter
	ops     []committedOp

	ledger          map[uint64]time.Time // every version seen: its manifest's store time
	prunableSince   map[uint64]time.Time // first observed below the floor and untagged
	belowFloorSince map[uint64]time.Time // first observed below the floor
	maxFloor        uint64
	maxFloorAt      string
	tagVersion      uint64 // the soak tag's version while it exists
	tagged          bool

	m1busy     bool
	longDone   bool
	longGroups int

	viol soakViolations

	// counters for the log
	passes, passErrs, sweeps, swept, cleaned, deadLettered, stalledOK, stalledRefused int
	staleNote                                                                         string
}

const soakTag = "soak-keep"

func newSoakWorld(t *testing.T, cfg soakConfig) *soakWorld {
	t.Helper()
	w := &soakWorld{t: t, cfg: cfg, ctx: context.Background(), ledger: map[uint64]time.Time{}, prunableSince: map[uint64]time.Time{}, belowFloorSince: map[uint64]time.Time{}}
	w.clock = fakeclock.New(cfg.Start)
	w.end = cfg.Start.Add(time.Duration(cfg.Hours) * time.Hour)
	w.disk = testkit.DiskStore(t)
	w.ts = fakeclock.NewStore(w.disk, w.clock)
	w.m1st = objstore.NewFaulty(w.ts)
	w.locker = lock.NewInProcess(w.clock)
	w.q = queue.NewEmbedded(queue.EmbeddedOptions{Clock: w.clock, MaxReceives: 5})
	w.ref = maintenance.TableRef{Name: tblName, Root: "wh/tbl/", Policy: cfg.Policy}
	w.cat = &memCatalog{refs: []maintenance.TableRef{w.ref}}
	w.drop = &dropEnqueuer{next: maintenance.QueueEnqueuer{Q: w.q}, rng: rand.New(rand.NewPCG(cfg.Seed, 20)), oneIn: cfg.DropOneIn}
	w.drop.onDrop = func(m maintenance.RangeMessage) {
		w.logf("cleanup message [%d, %d] lost", m.From, m.To)
	}
	w.m1 = w.runner("master-1", w.m1st, w.locker, nil)
	w.clean = &maintenance.Cleaner{
		Store: objstore.NewFaulty(w.ts), Tables: w.cat, Requeue: w.drop, Logger: discard,
		OpenOpts: table.Options{Clock: w.clock},
	}
	if _, err := table.Create(w.ctx, w.ts, w.ref.Root, kvSchema, "name", w.tableOpts()); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Writers {
		f := objstore.NewFaulty(w.ts)
		h, err := table.Open(w.ctx, f, w.ref.Root, w.tableOpts())
		if err != nil {
			t.Fatal(err)
		}
		w.writers = append(w.writers, &soakWriter{id: i, h: h, faulty: f, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)))})
	}
	return w
}

func (w *soakWorld) runner(owner string, st objstore.Store, lk lock.Locker, comp *maintenance.Compactor) *maintenance.Runner {
	r := &maintenance.Runner{
		Store: st, Catalog: w.cat, Locker: lk, Queue: w.drop, Clock: w.clock, Logger: discard,
		Owner: owner, Lease: w.cfg.Lease, Compactor: comp,
	}
	if w.cfg.ConfigureRunner != nil {
		w.cfg.ConfigureRunner(r)
	}
	return r
}

func (w *soakWorld) tableOpts() table.Options {
	return table.Options{Clock: fakeclock.NoSleep(w.clock), Grace: w.cfg.Policy.Grace,
		Format: max(w.cfg.Format, 2), InlineMaxBytes: w.cfg.InlineMax} // Format 0 pinned to 2
}

// at is the simulated time since the start, as h07:35 (or h07:35:02).
func (w *soakWorld) at() string {
	d := w.clock.Now().Sub(w.cfg.Start)
	s := fmt.Sprintf("h%02d:%02d", int(d.Hours()), int(d.Minutes())%60)
	if sec := int(d.Seconds()) % 60; sec != 0 {
		s += fmt.Sprintf(":%02d", sec)
	}
	return s
}

func (w *soakWorld) atTime(t time.Time) string {
	d := t.Sub(w.cfg.Start)
	return fmt.Sprintf("h%02d:%02d", int(d.Hours()), int(d.Minutes())%60)
}

func (w *soakWorld) violate(inv, format string, args ...any) {
	w.viol.add(inv, w.at()+": "+fmt.Sprintf(format, args...))
}

func (w *soakWorld) logf(format string, args ...any) {
	if testing.Verbose() {
		w.t.Logf("%s: %s", w.at(), fmt.Sprintf(format, args...))
	}
}

// --- scheduling ---

func (w *soakWorld) schedule(at time.Time, name string, fn func()) {
	w.seq++
	heap.Push(&w.events, &soakEvent{at: at, seq: w.seq, name: name, fn: fn})
}

// every schedules fn at first and every period after it, before the end.
func (w *soakWorld) every(first time.Time, period time.Duration, name string, fn func()) {
	at := first
	var run func()
	run = func() {
		if next := at.Add(period); next.Before(w.end) {
			at = next
			w.schedule(at, name, run)
		}
		fn()
	}
	if first.Before(w.end) {
		w.schedule(first, name, run)
	}
}

func (w *soakWorld) advanceTo(t time.Time) {
	if d := t.Sub(w.clock.Now()); d > 0 {
		w.clock.Advance(d)
	}
}

// runUntil runs every event due by t, in time order, then sets the clock
// to t. It is re-entrant: a stall inside an event calls it.
func (w *soakWorld) runUntil(t time.Time) {
	for len(w.events) > 0 && !w.events[0].at.After(t) {
		ev := heap.Pop(&w.events).(*soakEvent)
		w.advanceTo(ev.at)
		ev.fn()
	}
	w.advanceTo(t)
}

// --- the run ---

func (w *soakWorld) run() {
	cfg := w.cfg
	start := cfg.Start
	for _, sw := range w.writers {
		offset := time.Duration(sw.id) * cfg.WriteEvery / time.Duration(cfg.Writers)
		w.every(start.Add(offset+time.Minute), cfg.WriteEvery, fmt.Sprintf("writer %d", sw.id), func() { w.writerOp(sw) })
	}
	w.every(start.Add(cfg.MaintainEvery), cfg.MaintainEvery, "maintenance", func() {
		long := !w.longDone && w.clock.Now().Sub(start) >= time.Duration(cfg.LongCompactionHour)*time.Hour
		w.longDone = w.longDone || long
		w.maintain(long)
	})
	w.every(start.Add(cfg.MaintainEvery/2), cfg.SweepEvery, "sweep", func() { w.sweep("periodic") })
	w.every(start.Add(cfg.FullCheckEvery-5*time.Minute), cfg.FullCheckEvery, "full check", func() { w.fullCheck("periodic", false) })
	for _, s := range cfg.Stalls {
		w.schedule(start.Add(s.At), "stall", func() { w.stalledOp(s) })
	}
	w.schedule(start.Add(cfg.TagAt), "tag", w.tag)
	w.schedule(start.Add(cfg.UntagAt), "untag", w.untag)
	w.schedule(start.Add(cfg.StaleHolderAt), "stale holder", w.staleHolder)
	w.runUntil(w.end.Add(-time.Nanosecond))
	w.advanceTo(w.end)
	// The final pass: maintenance, cleanup, sweep; then the end checks.
	w.maintain(false)
	w.sweep("final")
	w.fullCheck("end", true)
}

// --- writers ---

func (w *soakWorld) writerOp(sw *soakWriter) {
	if sw.busy {
		return // stalled in an earlier op
	}
	sw.n++
	key := fmt.Sprintf("k%02d", sw.rng.IntN(w.cfg.KeySpace))
	if sw.rng.IntN(w.cfg.DeleteOneIn) == 0 {
		w.commitOp(sw, key, "", false)
		return
	}
	w.commitOp(sw, key, fmt.Sprintf("w%d-%d", sw.id, sw.n), false)
}

// commitOp upserts key=val (or deletes key if val is "") and records an
// acknowledged write in the model.
func (w *soakWorld) commitOp(sw *soakWriter, key, val string, stalled bool) {
	var res *table.CommitResult
	var err error
	if val == "" {
		res, err = sw.h.Delete(w.ctx, key)
	} else {
		rec := kv(key, val)
		res, err = sw.h.Upsert(w.ctx, rec)
		rec.Release()
	}
	switch {
	case err != nil && stalled && errors.Is(err, table.ErrStaleRead):
		w.stalledRefused++
		w.logf("stalled writer %d refused: %v", sw.id, err)
	case err != nil:
		w.violate("writer", "writer %d: %s %s: %v", sw.id, map[bool]string{true: "delete", false: "upsert"}[val == ""], key, err)
	case res.Committed:
		w.ops = append(w.ops, committedOp{res.Version, key, val})
		if stalled {
			w.stalledOK++
			w.logf("stalled writer %d committed %s=%s as version %d", sw.id, key, val, res.Version)
		}
	}
}

// stalledOp: the stall writer reads, uploads its data file, stalls (the
// world runs on), commits; its winning manifest PUT is in flight for
// s.InFlight, during which a sweep may run.
func (w *soakWorld) stalledOp(s soakStall) {
	sw := w.writers[w.cfg.StallWriter]
	if sw.busy {
		w.violate("scenario", "stall at %s skipped: writer %d still stalled", w.at(), sw.id)
		return
	}
	sw.busy = true
	defer func() { sw.busy = false }()
	if _, err := sw.h.Refresh(w.ctx); err != nil {
		w.violate("writer", "stalled writer %d: refresh: %v", sw.id, err)
		return
	}
	readAt := w.clock.Now()
	root := w.ref.Root
	phase := 0
	uploaded := ""
	sw.faulty.SetAfter(func(n int64, op objstore.Op) error {
		if phase == 0 && op.Kind == objstore.KindPut && strings.HasPrefix(op.Key, root+table.DataPrefix) {
			phase = 1
			uploaded = op.Key
			w.logf("writer %d stalls for %s after uploading %s", sw.id, s.Stall, strings.TrimPrefix(op.Key, root))
			w.runUntil(readAt.Add(s.Stall))
		}
		return nil
	})
	sw.faulty.SetBefore(func(n int64, op objstore.Op) error {
		if phase != 1 || op.Kind != objstore.KindPut || !op.Conditional || !strings.HasPrefix(op.Key, root+table.VersionsPrefix) {
			return nil
		}
		if _, err := w.ts.Head(w.ctx, op.Key); err == nil {
			return nil // this attempt loses the race: no flight to model
		}
		phase = 2
		if s.InFlight > 0 {
			w.clock.Advance(s.InFlight)
			w.logf("writer %d's manifest PUT %s in flight (read %s ago)", sw.id, strings.TrimPrefix(op.Key, root), w.clock.Now().Sub(readAt))
			if s.SweepInFlight {
				w.sweep("during a stalled writer's manifest PUT")
			}
		}
		return nil
	})
	defer func() { sw.faulty.SetAfter(nil); sw.faulty.SetBefore(nil) }()
	key := fmt.Sprintf("s%02d", int(w.clock.Now().Sub(w.cfg.Start).Hours()))
	committed := w.stalledOK
	w.commitOp(sw, key, fmt.Sprintf("stalled-w%d", sw.id), true)
	if w.stalledOK > committed && uploaded != "" {
		// The commit references the file it uploaded before stalling.
		if _, err := w.ts.Head(w.ctx, uploaded); errors.Is(err, objstore.ErrNotExist) {
			w.violate("retained", "stalled writer %d (read at %s, stalled %s, manifest PUT %s in flight) committed version %d referencing %s, which a sweep deleted meanwhile (issue 9 item 1)",
				sw.id, w.atTime(readAt), s.Stall, s.InFlight, w.ops[len(w.ops)-1].version, strings.TrimPrefix(uploaded, root))
		}
	}
	if phase == 0 && w.cfg.Format < 3 { // format 3: a one-row write is inline, no data file
		w.violate("scenario", "stalled writer never uploaded its data file")
	}
}

// --- maintenance ---

// maintain runs master-1's pass, drains the cleanup queue and observes.
func (w *soakWorld) maintain(long bool) {
	if w.m1busy {
		return
	}
	w.m1busy = true
	defer func() { w.m1busy = false }()
	if long {
		w.longGroups = 0
		root := w.ref.Root
		// Each group's work (reading its inputs, writing its output) takes
		// LongCompactionStep: the clock advances before each output file is
		// written, the writers carrying on meanwhile.
		w.m1st.SetBefore(func(n int64, op objstore.Op) error {
			if op.Kind == objstore.KindPut && strings.HasPrefix(op.Key, root+table.DataPrefix) {
				w.longGroups++
				w.runUntil(w.clock.Now().Add(w.cfg.LongCompactionStep))
			}
			return nil
		})
		defer w.m1st.SetBefore(nil)
	}
	w.pass("master-1", w.m1, long)
}

func (w *soakWorld) pass(who string, r *maintenance.Runner, long bool) (maintenance.TableReport, error) {
	began := w.at()
	rep, err := r.MaintainTable(w.ctx, w.ref)
	w.passes++
	if long {
		w.logf("long compaction (%s): %d groups started, %+v, err %v", began, w.longGroups, rep.Compacted, err)
		// Format 3: the writes are inline, so there may be no group to compact.
		if w.cfg.Format < 3 && time.Duration(rep.Compacted.Planned)*w.cfg.LongCompactionStep <= w.cfg.Lease {
			w.violate("scenario", "the compaction at %s did not outlive its lease: %d groups planned of %s each, lease %s",
				began, rep.Compacted.Planned, w.cfg.LongCompactionStep, w.cfg.Lease)
		}
		if rep.Prune.Latest == 0 {
			w.violate("pass", "pass started %s, whose compaction outlived its lease, did not prune (issue 9 item 3): %v", began, err)
		}
	}
	if err != nil {
		w.passErrs++
		if who == "master-1" {
			w.violate("pass", "%s's pass started %s failed: %v", who, began, err)
		}
	}
	w.drain()
	w.observe(who)
	w.latestCheck(who)
	return rep, err
}

func (w *soakWorld) drain() {
	st, err := maintenance.DrainLocal(w.ctx, w.q, w.clean, discard)
	w.cleaned += st.Succeeded
	if st.DeadLettered > 0 {
		w.deadLettered += st.DeadLettered
		w.logf("cleanup: %d message(s) dead-lettered", st.DeadLettered)
	}
	if err != nil {
		w.violate("cleanup", "drain: %v", err)
	}
}

func (w *soakWorld) open() (*table.Table, error) {
	return table.Open(w.ctx, w.ts, w.ref.Root, w.tableOpts())
}

func (w *soakWorld) sweep(why string) {
	tb, err := w.open()
	if err == nil {
		var n int
		n, err = w.cfg.Sweep(w.ctx, tb, w.cfg.Policy, w.clock.Now())
		w.swept += n
		if n > 0 {
			w.logf("sweep (%s) deleted %d file(s)", why, n)
		}
	}
	w.sweeps++
	if err != nil {
		w.violate("sweep", "sweep (%s): %v", why, err)
	}
}

// observe records new versions and their store times, the floor (which
// must not decrease), the tags, and when each version became prunable.
func (w *soakWorld) observe(who string) {
	tb, err := w.open()
	if err != nil {
		w.violate("retained", "after %s: open: %v", who, err)
		return
	}
	floor, err := tb.Floor(w.ctx)
	if err != nil {
		w.violate("retained", "after %s: floor: %v", who, err)
		return
	}
	if floor < w.maxFloor {
		w.violate("floor", "after %s: floor %d, below %d (set by %s) (issue 9 item 4)", who, floor, w.maxFloor, w.maxFloorAt)
	} else if floor > w.maxFloor {
		w.maxFloor, w.maxFloorAt = floor, who+" at "+w.at()
	}
	vs, err := tb.Versions(w.ctx)
	if err != nil {
		w.violate("retained", "after %s: versions: %v", who, err)
		return
	}
	for _, v := range vs {
		if _, ok := w.ledger[v.Version]; !ok {
			w.ledger[v.Version] = v.Time
		}
	}
	tags, err := tb.Tags(w.ctx)
	if err != nil {
		w.violate("tag", "after %s: tags: %v", who, err)
		return
	}
	tagged := map[uint64]bool{}
	for _, v := range tags {
		tagged[v] = true
	}
	for v := range w.ledger {
		if _, ok := w.belowFloorSince[v]; !ok && v < floor {
			w.belowFloorSince[v] = w.clock.Now()
		}
		if v < floor && !tagged[v] {
			if _, ok := w.prunableSince[v]; !ok {
				w.prunableSince[v] = w.clock.Now()
			}
		}
	}
}

// latestCheck compares the latest version with the model.
func (w *soakWorld) latestCheck(who string) {
	tb, err := w.open()
	if err != nil {
		w.violate("rows", "after %s: open: %v", who, err)
		return
	}
	snap, err := tb.Latest(w.ctx)
	if err != nil {
		w.violate("rows", "after %s: latest: %v", who, err)
		return
	}
	w.checkVersion("rows", snap.Version(), snap, "latest")
}

// checkVersion scans snap and compares it with the model at v.
func (w *soakWorld) checkVersion(inv string, v uint64, snap *table.Snapshot, why string) bool {
	if err := w.versionErr(v, snap); err != nil {
		w.violate(inv, "version %d (%s): %v", v, why, err)
		return false
	}
	return true
}

// versionErr scans snap and compares it with the model at v.
func (w *soakWorld) versionErr(v uint64, snap *table.Snapshot) error {
	rows, err := scanSnap(w.ctx, snap)
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	sort.Slice(w.ops, func(i, j int) bool { return w.ops[i].version < w.ops[j].version })
	return diffRows(rows, modelAt(w.ops, v))
}

// --- tags ---

func (w *soakWorld) tag() {
	tb, err := w.open()
	if err != nil {
		w.violate("tag", "open: %v", err)
		return
	}
	v := tb.Cached().Version
	if err := tb.Tag(w.ctx, soakTag, v); err != nil {
		w.violate("tag", "tag %s on version %d: %v", soakTag, v, err)
		return
	}
	w.tagVersion, w.tagged = v, true
	w.logf("tagged version %d", v)
}

func (w *soakWorld) untag() {
	if !w.tagged {
		return
	}
	tb, err := w.open()
	if err == nil {
		err = tb.Untag(w.ctx, soakTag)
	}
	if err != nil {
		w.violate("tag", "untag %s (version %d): %v", soakTag, w.tagVersion, err)
		return
	}
	w.tagged = false
	w.logf("untagged version %d", w.tagVersion)
}

// --- the stale lease holder ---

// staleHolder runs master-2 (prune planning only). Right after its fence
// check passes, at its next floor read (or before its first write), it
// pauses: its lease expires, master-1 takes the lock and maintains, the
// writers go on. Then master-2 carries on. The floor must not decrease.
func (w *soakWorld) staleHolder() {
	root := w.ref.Root
	st := objstore.NewFaulty(w.ts)
	checked, paused := false, false
	lk := &checkHookLocker{Locker: w.locker, onCheck: func(err error) {
		if err == nil {
			checked = true
		}
	}}
	comp := &maintenance.Compactor{Planner: noGroups{}, Logger: discard, Clock: w.clock, Margin: 5 * time.Second}
	m2 := w.runner("master-2", st, lk, comp)
	pause := func(where string) {
		paused = true
		began := w.clock.Now()
		w.staleNote = fmt.Sprintf("master-2 paused %s at %s", where, w.at())
		w.logf("%s for %s", w.staleNote, w.cfg.StaleHolderPause)
		w.runUntil(began.Add(w.cfg.Lease + time.Minute))
		w.maintain(false) // master-1 takes the lock master-2 lost
		w.runUntil(began.Add(w.cfg.StaleHolderPause))
		w.logf("master-2 resumes")
	}
	st.SetAfter(func(n int64, op objstore.Op) error {
		if checked && !paused && op.Kind == objstore.KindGet && op.Key == root+w.cfg.FloorKey {
			pause("after reading the floor")
		}
		return nil
	})
	st.SetBefore(func(n int64, op objstore.Op) error {
		if checked && !paused && (op.Kind == objstore.KindPut || op.Kind == objstore.KindDelete) {
			pause("before its first write " + strings.TrimPrefix(op.Key, root))
		}
		return nil
	})
	rep, err := w.pass("master-2", m2, false)
	w.logf("master-2 done: floor %d -> %d, %d ranges, err %v", rep.Prune.OldFloor, rep.Prune.Floor, len(rep.Prune.Ranges), err)
	if !paused {
		w.violate("scenario", "master-2 never paused between its fence check and its writes (checked %v)", checked)
	}
	w.fullCheck("after the stale lease holder", false)
}

// --- full checks ---

// fullCheck checks the latest rows and every retained version; at the end
// also the manifest and file bounds.
func (w *soakWorld) fullCheck(label string, end bool) {
	tb, err := w.open()
	if err != nil {
		w.violate("retained", "%s: open: %v", label, err)
		return
	}
	floor, err := tb.Floor(w.ctx)
	if err != nil {
		w.violate("retained", "%s: floor: %v", label, err)
		return
	}
	vs, err := tb.Versions(w.ctx)
	if err != nil {
		w.violate("retained", "%s: versions: %v", label, err)
		return
	}
	tags, err := tb.Tags(w.ctx)
	if err != nil {
		w.violate("tag", "%s: tags: %v", label, err)
	}
	for _, v := range vs {
		if _, ok := w.ledger[v.Version]; !ok {
			w.ledger[v.Version] = v.Time
		}
	}
	if w.tagged {
		if tags[soakTag] != w.tagVersion {
			w.violate("tag", "%s: tag %s is %d, want %d", label, soakTag, tags[soakTag], w.tagVersion)
		}
	} else if v, ok := tags[soakTag]; ok {
		w.violate("tag", "%s: tag %s (version %d) still there after Untag", label, soakTag, v)
	}
	// What must be retained, and why.
	why := map[uint64]string{}
	var latest uint64
	for v := range w.ledger {
		latest = max(latest, v)
	}
	if len(vs) > 0 {
		latest = max(latest, vs[len(vs)-1].Version)
	}
	now := w.clock.Now()
	known := make([]uint64, 0, len(w.ledger))
	for v := range w.ledger {
		known = append(known, v)
	}
	sort.Slice(known, func(i, j int) bool { return known[i] < known[j] })
	for i, v := range known {
		switch {
		case v == latest:
			why[v] = "latest"
		case v+uint64(w.cfg.Policy.KeepLast) > latest:
			why[v] = fmt.Sprintf("among the last %d", w.cfg.Policy.KeepLast)
		case i+1 < len(known) && now.Sub(w.ledger[known[i+1]]) < w.cfg.Policy.Grace:
			why[v] = fmt.Sprintf("superseded %s ago", now.Sub(w.ledger[known[i+1]]).Round(time.Second))
		}
	}
	for name, v := range tags {
		why[v] = "tagged " + name
	}
	// The floor promises every version from it to the latest: stored ones,
	// and any seen before (a cleaner must not have deleted it).
	for _, v := range known {
		if _, ok := why[v]; !ok && v >= floor {
			why[v] = fmt.Sprintf("at or above the floor %d", floor)
		}
	}
	retained := make([]uint64, 0, len(why))
	for v := range why {
		retained = append(retained, v)
	}
	sort.Slice(retained, func(i, j int) bool { return retained[i] < retained[j] })
	refs := map[string]bool{}
	// Failures of retained versions are reported per run of consecutive
	// versions retained for the same kind of reason failing the same way.
	type miss struct {
		from, to   uint64
		kind, what string
		err        error
	}
	var misses []miss
	kindOf := func(why string) string {
		for _, k := range []string{"superseded", "among", "at or above"} {
			if strings.HasPrefix(why, k) {
				return k
			}
		}
		return why
	}
	digits := regexp.MustCompile(`[0-9]+`)
	fail := func(v uint64, what string, err error) {
		k, class := kindOf(why[v]), what+digits.ReplaceAllString(err.Error(), "#")
		if n := len(misses); n > 0 && misses[n-1].to+1 == v && misses[n-1].kind == k && misses[n-1].what == class {
			misses[n-1].to = v
			return
		}
		misses = append(misses, miss{v, v, k, class, fmt.Errorf("%s: %w", what, err)})
	}
	for _, v := range retained {
		snap, err := tb.Checkout(w.ctx, v)
		if err != nil {
			fail(v, "checkout", err)
			continue
		}
		for _, f := range snap.Manifest().Fragments {
			refs[f.File.DataKey()] = true
			if f.Deletion != nil {
				refs[table.DeletionKey(f.File, f.Deletion.ID)] = true
			}
		}
		if v == latest {
			w.checkVersion("rows", v, snap, label+"; latest")
		} else if err := w.versionErr(v, snap); err != nil {
			fail(v, "read", err)
		}
	}
	for _, m := range misses {
		vs := fmt.Sprintf("version %d", m.from)
		if m.to > m.from {
			vs = fmt.Sprintf("versions %d-%d", m.from, m.to)
		}
		w.violate("retained", "%s: %s (retained: %s; floor %d): %v", label, vs, why[m.from], floor, m.err)
	}
	if !end {
		return
	}
	// Manifests below the floor: each must be gone within the bound of
	// when it became prunable.
	tagged := map[uint64]bool{}
	for _, v := range tags {
		tagged[v] = true
	}
	var leaks []leak
	for _, v := range vs {
		if v.Version >= floor || tagged[v.Version] {
			continue
		}
		since, ok := w.prunableSince[v.Version]
		if ok && now.Sub(since) > w.cfg.ManifestBound {
			leaks = append(leaks, leak{v.Version, since})
		}
	}
	w.reportLeaks(leaks, "manifest", floor, now)
	// Change records too: record r is deleted with the range holding r-1
	// (tagged or not), so it is due once r-1 fell below the floor.
	var changeLeaks []leak
	err = objstore.ListAll(w.ctx, w.ts, w.ref.Root+table.ChangesPrefix, "", func(o objstore.ObjectInfo) error {
		r, ok := table.ParseChangeKey(strings.TrimPrefix(o.Key, w.ref.Root))
		if !ok || r > floor {
			return nil
		}
		owner := max(r, 2) - 1
		if since, ok := w.belowFloorSince[owner]; ok && now.Sub(since) > w.cfg.ManifestBound {
			changeLeaks = append(changeLeaks, leak{r, since})
		}
		return nil
	})
	if err != nil {
		w.violate("manifests", "list change records: %v", err)
	}
	sort.Slice(changeLeaks, func(i, j int) bool { return changeLeaks[i].v < changeLeaks[j].v })
	w.reportLeaks(changeLeaks, "change record", floor, now)
	for _, prefix := range []string{table.DataPrefix, table.DeletionsPrefix} {
		err := objstore.ListAll(w.ctx, w.ts, w.ref.Root+prefix, "", func(o objstore.ObjectInfo) error {
			rel := strings.TrimPrefix(o.Key, w.ref.Root)
			if age := now.Sub(o.LastModified); !refs[rel] && age > w.cfg.FileBound {
				w.violate("files", "unreferenced %s written at %s (age %s, bound %s) survived", rel, w.atTime(o.LastModified), age.Round(time.Minute), w.cfg.FileBound)
			}
			return nil
		})
		if err != nil {
			w.violate("files", "list %s: %v", prefix, err)
		}
	}
}

type leak struct {
	v     uint64
	since time.Time
}

// reportLeaks reports leaked objects (sorted by version), one message per
// run of consecutive versions.
func (w *soakWorld) reportLeaks(leaks []leak, what string, floor uint64, now time.Time) {
	for i := 0; i < len(leaks); {
		j := i
		for j+1 < len(leaks) && leaks[j+1].v == leaks[j].v+1 {
			j++
		}
		note := ""
		if w.tagVersion != 0 && !w.tagged && w.tagVersion+1 >= leaks[i].v && w.tagVersion <= leaks[j].v {
			note = fmt.Sprintf(" (next to version %d, tagged %s until %s)", w.tagVersion, soakTag, w.atTime(w.cfg.Start.Add(w.cfg.UntagAt)))
		}
		vs := fmt.Sprintf("%s %d", what, leaks[i].v)
		if j > i {
			vs = fmt.Sprintf("%ss %d-%d (%d)", what, leaks[i].v, leaks[j].v, j-i+1)
		}
		w.violate("manifests", "%s below the floor %d since %s (%s ago, bound %s) still stored%s",
			vs, floor, w.atTime(leaks[i].since), now.Sub(leaks[i].since).Round(time.Minute), w.cfg.ManifestBound, note)
		i = j + 1
	}
}

// report logs what the soak did and fails with every violation.
func (w *soakWorld) report() {
	tb, err := w.open()
	var stored int
	var floor, latest uint64
	if err == nil {
		vs, _ := tb.Versions(w.ctx)
		stored = len(vs)
		floor, _ = tb.Floor(w.ctx)
		latest = tb.Cached().Version
	}
	w.t.Logf("soak: %d commits by %d writers, %d maintenance passes (%d failed), %d cleanup messages handled, %d sent, %d lost, %d dead-lettered; "+
		"%d sweeps deleted %d files; stalled ops: %d committed, %d refused; %s; at the end %d versions stored, floor %d, latest %d",
		len(w.ops), len(w.writers), w.passes, w.passErrs, w.cleaned, w.drop.sent, w.drop.dropped, w.deadLettered,
		w.sweeps, w.swept, w.stalledOK, w.stalledRefused, w.staleNote, stored, floor, latest)
	if len(w.viol.order) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %d invariant(s) violated:", len(w.viol.order))
	for _, inv := range w.viol.order {
		fmt.Fprintf(&b, "\n[%s] %s: %d violation(s)", inv, soakInvariants[inv], w.viol.count[inv])
		for _, m := range w.viol.msgs[inv] {
			fmt.Fprintf(&b, "\n    %s", m)
		}
		if n := w.viol.count[inv] - len(w.viol.msgs[inv]); n > 0 {
			fmt.Fprintf(&b, "\n    ... %d more", n)
		}
	}
	w.t.Error(b.String())
}

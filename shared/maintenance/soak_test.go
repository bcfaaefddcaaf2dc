package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

// soakConfig is every knob of TestSoak48Hours, in one place so that it can
// follow API changes (new Runner fields, a new sweep signature) without
// touching the simulation in soak_helpers_test.go.
type soakConfig struct {
	// Format and InlineMax are the table's (0: the defaults; 3: inline writes).
	Format, InlineMax uint64

	Seed  uint64
	Start time.Time // simulated start (fixed: the run is reproducible)
	Hours int       // simulated duration

	// Writers do registry churn: one op (upsert or delete of one key) every
	// WriteEvery each, staggered.
	Writers     int
	WriteEvery  time.Duration
	KeySpace    int
	DeleteOneIn int

	Policy         maintenance.Policy
	Lease          time.Duration // Runner.Lease
	MaintainEvery  time.Duration // the maintenance pass (master-1), then a drain
	SweepEvery     time.Duration // the orphan sweep (offset half a pass)
	DropOneIn      int           // cleanup messages lost (never twice for a range)
	FullCheckEvery time.Duration

	// ConfigureRunner, if set, adjusts every Runner built (master-1 and the
	// stale master-2): e.g. lease renewal fields once they exist.
	ConfigureRunner func(r *maintenance.Runner)
	// Sweep runs one orphan sweep and returns the files deleted.
	Sweep func(ctx context.Context, t *table.Table, p maintenance.Policy, now time.Time) (int, error)

	// StallWriter is the writer that stalls; Stalls are its stalled ops.
	StallWriter int
	Stalls      []soakStall

	// The pass at LongCompactionHour sees the clock advance by
	// LongCompactionStep before each of its manifest writes (group commits).
	LongCompactionHour int
	LongCompactionStep time.Duration

	// At StaleHolderAt a second maintainer (master-2, compacting nothing)
	// passes its fence check, then pauses for StaleHolderPause (its lease
	// expires; master-1 takes the lock and maintains) right after reading
	// the floor (FloorKey), or before its first write, whichever comes
	// first; then it carries on.
	StaleHolderAt    time.Duration
	StaleHolderPause time.Duration
	FloorKey         string // relative to the table root

	// A tag on the latest version at TagAt, removed at UntagAt.
	TagAt, UntagAt time.Duration

	// Bounds checked at the end.
	ManifestBound time.Duration // below-floor manifest age (ReplanAfter + one pass)
	FileBound     time.Duration // unreferenced file age (grace + table.SafetyMargin)
}

// soakStall is one stalled op: the writer reads (refreshes), uploads its
// data file, then the clock passes Stall (everything else keeps running)
// before it commits; its winning manifest PUT is then InFlight long, with
// an orphan sweep run meanwhile if SweepInFlight.
type soakStall struct {
	At            time.Duration // since Start
	Stall         time.Duration
	InFlight      time.Duration
	SweepInFlight bool
}

func defaultSoakConfig() soakConfig {
	p := testPolicy()
	p.KeepLast = 5
	p.TargetRows = 4
	p.RangeVersions = 5
	p.MaxKeysPerRun = 40
	p.ReplanAfter = 6 * time.Hour
	h := time.Hour
	return soakConfig{
		Seed:           9,
		Start:          time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC),
		Hours:          48,
		Writers:        4,
		WriteEvery:     15 * time.Minute,
		KeySpace:       40,
		DeleteOneIn:    4,
		Policy:         p,
		Lease:          5 * time.Minute,
		MaintainEvery:  h,
		SweepEvery:     3 * h,
		DropOneIn:      20,
		FullCheckEvery: 6 * h,
		Sweep: func(ctx context.Context, t *table.Table, p maintenance.Policy, now time.Time) (int, error) {
			r, err := maintenance.Sweep(ctx, t, p, now, 0, false)
			return r.Deleted, err
		},
		StallWriter: 3,
		Stalls: []soakStall{
			{At: 6*h + 20*time.Minute, Stall: 55 * time.Minute},
			{At: 18*h + 20*time.Minute, Stall: 55 * time.Minute},
			{At: 27*h + 20*time.Minute, Stall: 55 * time.Minute, InFlight: 100 * time.Millisecond, SweepInFlight: true},
			// At the edge of the writers' bound: the read is 1 s short of
			// the grace window at the stale-read check, and the manifest PUT
			// takes 2 s, during which a sweep runs (issue 9 item 1).
			{At: 42*h + 20*time.Minute, Stall: p.Grace - time.Second, InFlight: 2 * time.Second, SweepInFlight: true},
		},
		LongCompactionHour: 12,
		LongCompactionStep: 150 * time.Second,
		StaleHolderAt:      34*h + 40*time.Minute,
		StaleHolderPause:   40 * time.Minute,
		FloorKey:           "_refs/floor.json",
		TagAt:              9*h + 15*time.Minute,
		UntagAt:            24*h + 15*time.Minute,
		ManifestBound:      p.ReplanAfter + h,
		FileBound:          p.Grace + table.SafetyMargin,
	}
}

// TestSoak48Hours is issue 9's soak: 48 simulated hours on a fake clock, in
// one goroutine (a discrete-event simulation: no interleaving can vary), of
// 4 writers churning a registry (one of them stalling for most of the grace
// window now and then), hourly maintenance with 1 in 20 cleanup messages
// lost, a compaction that outlives its lease, a stale lease holder, a tag
// added and removed, and periodic orphan sweeps. Invariants are checked
// along the way and at the end; every violation is collected and reported
// with its simulated time:
//   - rows: the latest version equals the writers' model (every
//     acknowledged write present, nothing resurrected);
//   - retained: every retained version (latest, last KeepLast, tagged,
//     superseded less than grace ago, stored at or above the floor) opens
//     and reads exactly the model at that version;
//   - floor: the retention floor never decreases;
//   - pass: maintenance passes do not fail, and pruning runs in the pass
//     whose compaction outlived its lease;
//   - manifests: no manifest below the floor older than ReplanAfter + one
//     pass remains;
//   - files: no unreferenced data/deletion file older than grace +
//     table.SafetyMargin remains.
func TestSoak48Hours(t *testing.T) {
	cfg := defaultSoakConfig()
	w := newSoakWorld(t, cfg)
	w.run()
	w.report()
}

// TestSoak48HoursFormat3 is TestSoak48Hours on a format-3 table (inline
// writes, default bound): the same invariants, with inline-only versions
// that have no change record.
func TestSoak48HoursFormat3(t *testing.T) {
	cfg := defaultSoakConfig()
	cfg.Format = 3
	w := newSoakWorld(t, cfg)
	w.run()
	w.report()
	// The latest manifest of the registry churn stays small, inline rows
	// included (issue 23: at most 4 KB).
	vs, err := table.Open(w.ctx, w.ts, w.ref.Root, w.tableOpts())
	if err != nil {
		t.Fatal(err)
	}
	body, err := w.ts.Get(w.ctx, w.ref.Root+table.ManifestKey(vs.Cached().Version))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("latest manifest %d bytes, %d inline rows, %d fragments", len(body), len(vs.Cached().Inline), len(vs.Cached().Fragments))
	if len(body) > 4096 {
		t.Errorf("latest manifest %d bytes, above 4 KB", len(body))
	}
}

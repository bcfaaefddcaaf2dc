package maintenance_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestHugeGraceKeepsInFlightUpload (issue 19 item 3): a writer's upload is
// ten minutes old and its manifest PUT is in flight when the sweep runs,
// under a grace near MaxInt64 ("grace forever"): the writer grace stored
// at Create (now refused: ErrInvalidGrace), or the policy's grace within
// 45 s of the limit (now counted as table.MaxGrace). Before the fix the
// retention grace wrapped to a negative duration, the sweep deleted the
// upload, and the acknowledged latest version was unreadable.
func TestHugeGraceKeepsInFlightUpload(t *testing.T) {
	near := time.Duration(math.MaxInt64 - int64(10*time.Second))
	for _, c := range []struct {
		name           string
		writer, policy time.Duration
	}{
		{"writer grace", math.MaxInt64 - 1, time.Hour},
		{"policy grace", time.Hour, near},
		{"both", near, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e, ts := newTimedEnv(t, testPolicy())
			opts := e.opts()
			opts.Grace = c.writer
			a, err := table.Create(ctx, e.disk, e.ref.Root, kvSchema, "name", opts)
			if c.writer > table.MaxGrace {
				if errors.Is(err, table.ErrInvalidGrace) {
					return
				}
				t.Errorf("Create with writer grace %d: %v, want ErrInvalidGrace", c.writer, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			model := map[string]string{}
			for _, k := range []string{"a", "b"} {
				upsert(t, a, k, "1")
				model[k] = "1"
			}
			wf := objstore.NewFaulty(ts)
			w, err := table.Open(ctx, wf, e.ref.Root, opts)
			if err != nil {
				t.Fatal(err)
			}
			p := testPolicy()
			p.Grace = c.policy
			var swept *maintenance.SweepResult
			wf.SetBefore(func(_ int64, op objstore.Op) error {
				if swept != nil || op.Kind != objstore.KindPut || !op.Conditional || !strings.Contains(op.Key, table.VersionsPrefix) {
					return nil
				}
				e.clock.Advance(10 * time.Minute) // the upload is 10 min old, its commit in flight
				st, err := table.Open(ctx, e.faulty, e.ref.Root, e.opts())
				if err != nil {
					t.Fatal(err)
				}
				if g := maintenance.RetentionGrace(st, p); g < st.WriterGrace()+table.SafetyMargin {
					t.Errorf("retention grace %d, below W + SafetyMargin", g)
				}
				res, err := maintenance.Sweep(ctx, st, p, e.clock.Now(), 0, false)
				if err != nil {
					t.Fatalf("sweep: %v", err)
				}
				swept = &res
				return nil
			})
			rec := kv("slow", "writer")
			_, err = w.Upsert(ctx, rec)
			rec.Release()
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			model["slow"] = "writer"
			if swept == nil {
				t.Fatal("writer never reached its manifest put")
			}
			if swept.Deleted != 0 {
				t.Errorf("sweep deleted %d files of a commit in flight (%+v)", swept.Deleted, *swept)
			}
			snap, err := e.open(t).Latest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := scanSnap(ctx, snap)
			if err != nil {
				t.Fatalf("latest version %d unreadable: %v", snap.Version(), err)
			}
			if err := diffRows(rows, model); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRetentionAtMaxGraceOnFakeClock: at the largest grace, R = MaxGrace +
// SafetyMargin (~100 years) is crossed on a fake clock from both sides: a
// version superseded exactly R ago is retained and 1 ns later prunable;
// an unreferenced file exactly R old is kept and 1 ns later swept. A
// policy grace beyond MaxGrace (up to MaxInt64) behaves as MaxGrace.
func TestRetentionAtMaxGraceOnFakeClock(t *testing.T) {
	for _, pg := range []time.Duration{table.MaxGrace, table.MaxGrace + time.Hour, math.MaxInt64} {
		ctx := context.Background()
		p := testPolicy() // keep-last 3
		p.Grace = pg
		e, ts := newTimedEnv(t, testPolicy())
		tb := e.create(t)
		t0 := e.clock.Now()
		for _, k := range []string{"k0", "k1", "k2", "k3", "k4"} { // v2..v6, all at T0
			upsert(t, tb, k, "a")
		}
		orphan := e.ref.Root + table.DataPrefix + "00000000000000aa.parquet"
		if err := ts.Put(ctx, orphan, []byte("x")); err != nil {
			t.Fatal(err)
		}
		r := maintenance.RetentionGrace(tb, p)
		if r != table.MaxGrace+table.SafetyMargin {
			t.Fatalf("policy grace %d: R = %d, want MaxGrace + SafetyMargin", pg, r)
		}
		check := func(wantFloor uint64, wantDeleted int) {
			t.Helper()
			plan, err := maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			res, err := maintenance.Sweep(ctx, tb, p, e.clock.Now(), 0, true)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Floor != wantFloor || len(res.Planned) != wantDeleted {
				t.Fatalf("policy grace %d at T0 + %s: floor %d, sweep would delete %v; want floor %d, %d deletions",
					pg, e.clock.Now().Sub(t0), plan.Floor, res.Planned, wantFloor, wantDeleted)
			}
		}
		e.clock.Advance(r)
		check(1, 0)
		e.clock.Advance(time.Nanosecond)
		check(4, 1)
	}
}

// TestPolicyGraceBounded: a policy grace above table.MaxGrace is refused
// at registration (ErrInvalidPolicy); MaxGrace itself is accepted.
func TestPolicyGraceBounded(t *testing.T) {
	p := testPolicy()
	p.Grace = table.MaxGrace
	if err := p.Validate(); err != nil {
		t.Fatalf("MaxGrace: %v", err)
	}
	for _, g := range []time.Duration{table.MaxGrace + 1, math.MaxInt64 - 10*time.Second, math.MaxInt64} {
		p.Grace = g
		if err := p.Validate(); !errors.Is(err, maintenance.ErrInvalidPolicy) {
			t.Errorf("grace %d: %v, want ErrInvalidPolicy", g, err)
		}
	}
}

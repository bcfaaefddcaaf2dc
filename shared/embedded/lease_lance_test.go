package embedded

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// TestLanceReaderLease: a reader leases version V of a Lance dataset
// (eight versions below the latest) and renews it; tablekeep passes run
// over simulated hours (past grace and past the first ttl) while LanceDB
// writes. After every pass LanceDB itself checks out every listed version:
// V is listed and reads exactly its rows. After Release, the next pass
// prunes V, and LanceDB reads every version still listed as before.
func TestLanceReaderLease(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbdir := dir + "/lance"
	c := lancetest.Create(t, dbdir, "ds", 20, "")
	before := lancetest.Dump(t, dbdir, "ds")
	if len(before.Versions) < 10 {
		t.Fatalf("fixture: %d versions", len(before.Versions))
	}
	V := before.Versions[len(before.Versions)-9]
	clk := &skewClock{}
	w, err := Open(ctx, dir, clk, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := maintenance.Policy{KeepLast: 3, Grace: time.Hour}
	if err := w.Catalog.RegisterFormat(ctx, "ds", "lance/ds.lance", p, catalog.FormatLance); err != nil {
		t.Fatal(err)
	}
	src := lance.NewSource(w.Store, "lance/ds.lance/")
	const ttl = 3 * time.Hour
	lease, err := src.LeaseDirAt(clk, nil).Acquire(ctx, V, ttl)
	if err != nil {
		t.Fatal(err)
	}
	keptWithV := func(floor uint64) func(uint64) bool {
		return func(v uint64) bool { return v >= V || lancetest.AtOrAbove(floor, c.Tags)(v) }
	}
	pass := func(label string) *maintenance.TableReport {
		t.Helper()
		rep, err := w.Maintain(ctx, Options{Everything: true})
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		for i := range rep.Run.Tables {
			if rep.Run.Tables[i].Table == "ds" {
				return &rep.Run.Tables[i]
			}
		}
		t.Fatalf("%s: ds not maintained", label)
		return nil
	}
	clk.off = 2 * time.Hour // every version past the 1 h grace
	tr := pass("first pass")
	if tr.Prune.Floor != V || tr.Prune.Leased.By == nil || tr.Prune.Leased.By.ID != lease.ID() {
		t.Fatalf("first pass: floor %d (want %d, held by lease %s): %+v", tr.Prune.Floor, V, lease.ID(), tr.Prune.Leased)
	}
	lancetest.CheckRetained(t, before, lancetest.Dump(t, dbdir, "ds"), keptWithV(V))

	// LanceDB writes on; the reader renews; passes run past the first ttl.
	written := lancetest.Write(t, dbdir, "ds")
	if err := lease.Renew(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	for _, off := range []time.Duration{3 * time.Hour, 4 * time.Hour} {
		clk.off = off
		tr = pass("pass at +" + off.String())
		if tr.Prune.Floor > V {
			t.Fatalf("at +%s: floor %d above the leased version %d", off, tr.Prune.Floor, V)
		}
		d := lancetest.Dump(t, dbdir, "ds")
		if !slices.Contains(d.Versions, V) || !slices.Equal(d.Rows[jsonKey(V)], before.Rows[jsonKey(V)]) {
			t.Fatalf("at +%s LanceDB lists %v; leased version %d reads %d rows (%d before)", off, d.Versions, V, len(d.Rows[jsonKey(V)]), len(before.Rows[jsonKey(V)]))
		}
		if d.Versions[len(d.Versions)-1] != written {
			t.Fatalf("latest %d, want %d", d.Versions[len(d.Versions)-1], written)
		}
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	clk.off += 15 * time.Minute
	tr = pass("after release")
	if tr.Prune.Floor <= V || tr.Prune.Leased.By != nil {
		t.Fatalf("after release: floor %d, held %+v", tr.Prune.Floor, tr.Prune.Leased.By)
	}
	after := lancetest.Dump(t, dbdir, "ds")
	if slices.Contains(after.Versions, V) {
		t.Fatalf("released version %d still listed by LanceDB: %v", V, after.Versions)
	}
	for _, v := range after.Versions {
		if k := jsonKey(v); v <= c.Latest && !slices.Equal(after.Rows[k], before.Rows[k]) {
			t.Errorf("version %d reads %d rows, %d before", v, len(after.Rows[k]), len(before.Rows[k]))
		}
	}
}

func jsonKey(v uint64) string { return strconv.FormatUint(v, 10) }

package bench

import (
	"context"
	"strings"
	"testing"
)

// The fleet section runs at quick sizes and renders; its idle tables cost
// exactly one LIST each per pass.
func TestFleetSimQuick(t *testing.T) {
	cfg := DefaultFleetConfig(true)
	cfg.WorkDir = t.TempDir()
	res, err := FleetSim(context.Background(), cfg, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 {
		t.Fatalf("%d table maintenances failed", res.Failed)
	}
	md := MarkdownFleet(res)
	t.Log(md)
	for _, l := range res.Linearity {
		if l.PerTable != [5]float64{0, 0, 0, 1, 0} {
			t.Fatalf("%d idle tables: per table %v, want exactly 1 LIST", l.Tables, l.PerTable)
		}
	}
	// Notifications on: over one cadence every table is listed exactly
	// once (the tables and _registry), and _stats (not notified) at every
	// pass.
	if nf := res.Notified; nf.Passes != 24 || nf.Listed != cfg.Tables+1+nf.Passes {
		t.Fatalf("notified idle fleet: %d passes, %d tables listed, want 24 and %d", nf.Passes, nf.Listed, cfg.Tables+1+24)
	}
	if !strings.Contains(md, "Cost per table-month") {
		t.Fatal("no cost table")
	}
}

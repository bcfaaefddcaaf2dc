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
	if !strings.Contains(md, "Cost per table-month") {
		t.Fatal("no cost table")
	}
}

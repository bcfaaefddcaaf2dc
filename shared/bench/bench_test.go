package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The generator end to end on tiny sizes: every section, the plot, the
// cost table, and figures that must hold at any size.
func TestQuickReport(t *testing.T) {
	dir := t.TempDir()
	cfg := Defaults(true)
	cfg.WorkDir, cfg.DocsDir = filepath.Join(dir, "work"), filepath.Join(dir, "docs")
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(cfg.DocsDir, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Benchmarks", "Quick mode", "## Next to the seed's production figures", "## Registry churn with and without maintenance",
		"](" + PlotName + ")", "## Seed replay", "## Open and commit at scale", "## Compaction and cleanup throughput",
		"## Monthly cost per table", "$0.005 per 1,000", "$0.0004 per 1,000", "$0.023 per GB-month", PricesDate, "47 s", "0.7 s", "36 min",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	png, err := os.ReadFile(filepath.Join(cfg.DocsDir, PlotName))
	if err != nil || len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("plot: %d bytes, %v", len(png), err)
	}
	// Requests per open and per lookup do not grow with versions.
	for _, s := range res.Scales {
		if s.Open.Per("LIST") != 1 || s.Open.Per("GET") != 1 || s.Open.Per("PUT") != 0 || s.Lookup.Per("LIST") != 1 {
			t.Errorf("open at %d versions: %+v", s.Versions, s.Open)
		}
	}
	// Open + get under the s3 profile: one LIST, the manifest and the
	// fragment (the critical path is timing-dependent here: not checked).
	if og := res.OpenGet; og.Reqs.Per("LIST") != 1 || og.Reqs.Per("GET") < 2 || og.Reqs.Per("PUT") != 0 || og.Path.RoundTrips() == 0 {
		t.Errorf("open + get: %+v", og)
	}
	if !strings.Contains(string(md), "## Open + get by key at 200 versions under the s3 profile") {
		t.Errorf("benchmarks.md lacks the open + get section")
	}
	// Maintenance at object-store latency: one pass per profile with the
	// same requests (latency changes time, not counts), and the backlog
	// drained by 1 and 5 workers deleting the same keys.
	if !strings.Contains(string(md), "## Maintenance at object-store latency") || !strings.Contains(string(md), "| | none | s3-express | s3 |") {
		t.Errorf("benchmarks.md lacks the latency section")
	}
	if lp := res.Latency.Passes; len(lp) != 3 || lp[0].KeysDeleted == 0 || lp[0].Requests != lp[1].Requests || lp[0].Requests != lp[2].Requests || lp[2].OpenGet.List != 1 {
		t.Errorf("latency passes: %+v", lp)
	}
	if bd := res.Latency.Backlog.Drains; len(bd) != 2 || bd[0].Workers != 1 || bd[1].Workers != 5 || bd[0].Reqs.DeleteKeys == 0 ||
		bd[0].Reqs.DeleteKeys != bd[1].Reqs.DeleteKeys || bd[1].Messages != res.Latency.Backlog.Messages {
		t.Errorf("backlog drains: %+v", bd)
	}
	// Maintenance bounds versions (issue 11's goal: at most 100 at one
	// write a minute, maintenance triggered by need); without it every
	// write is a version.
	if res.Without.Final.Versions != cfg.ChurnOps+1 || res.With.Final.Versions > 100 || res.With.Final.Versions >= res.Without.Final.Versions {
		t.Errorf("versions: without %d, with %d", res.Without.Final.Versions, res.With.Final.Versions)
	}
	if res.Replay.After.Versions >= res.Replay.Before.Versions || res.Replay.Drain.C.DeleteKeys == 0 {
		t.Errorf("replay: %+v", res.Replay)
	}
	if res.Cleanup.Drain.C.DeleteKeys == 0 || len(res.Compaction) != 2 || res.Compaction[1].Res.OutputFrags != 1 {
		t.Errorf("throughput: %+v %+v", res.Cleanup, res.Compaction)
	}
	wo, wi := costs(res, seedRows)
	if wo.StorageDollars12 <= wi.StorageDollars12 || wi.MaintRequests.Total() == 0 {
		t.Errorf("costs: %+v %+v", wo, wi)
	}
}

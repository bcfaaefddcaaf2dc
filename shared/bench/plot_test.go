package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestWritePlot: the churn plot (three log-scale panels) is a PNG, also
// with zero values (the log scale has no zero).
func TestWritePlot(t *testing.T) {
	var without, with []Sample
	for m := 0; m <= 1000; m += 100 {
		without = append(without, Sample{Minute: m, Versions: m + 1, LatestManifestBytes: int64(100 + 40*m), ManifestBytes: int64(100 * (m + 1) * (m + 1))})
		with = append(with, Sample{Minute: m, Versions: min(m+1, 12), LatestManifestBytes: int64(120), ManifestBytes: int64(m % 3)})
	}
	path := filepath.Join(t.TempDir(), PlotName)
	if err := writePlot(path, without, with); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 10000 {
		t.Fatalf("not a plot: %d bytes", len(b))
	}
}

package lance_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBenchSpliceMarked: the benchmark's figures replace exactly what
// stands between the markers; a file without both markers (or with one
// twice) is an error and is left as it was.
func TestBenchSpliceMarked(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lance.md")
	doc := "a\n" + lanceBenchBegin + "\nold\n" + lanceBenchEnd + "\nb\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second run replaces the first's figures
		if err := spliceMarked(p, lanceBenchBegin, lanceBenchEnd, "new\n"); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if want := "a\n" + lanceBenchBegin + "\nnew\n" + lanceBenchEnd + "\nb\n"; string(got) != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	for _, bad := range []string{"a\n", lanceBenchEnd + "\n" + lanceBenchBegin + "\n", lanceBenchBegin + lanceBenchBegin + lanceBenchEnd} {
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := spliceMarked(p, lanceBenchBegin, lanceBenchEnd, "new\n"); err == nil {
			t.Fatalf("%q: no error", bad)
		}
		if got, _ := os.ReadFile(p); string(got) != bad {
			t.Fatalf("%q rewritten to %q", bad, got)
		}
	}
}

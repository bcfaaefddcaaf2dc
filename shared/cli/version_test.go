package cli

import (
	"strings"
	"testing"
)

// TestVersionStamp: without Go's VCS stamp (go test has none, nor a build
// with GOFLAGS=-buildvcs=false), --version shows the commit make build
// stamps in (Makefile VERSION_STAMP).
func TestVersionStamp(t *testing.T) {
	old := buildStamp
	t.Cleanup(func() { buildStamp = old })
	buildStamp = "commit 0123456789ab+dirty, 2026-12-01T21:00:00Z"
	if v := buildVersion(); !strings.Contains(v, "(commit 0123456789ab") {
		t.Fatalf("buildVersion %q lacks the stamp", v)
	}
}

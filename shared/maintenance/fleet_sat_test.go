package maintenance

import (
	"testing"
	"time"
)

// A mark's retry time saturates instead of wrapping.
func TestFleetAddSatSaturates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if at := addSat(now, 1<<63-1); at.Before(now) {
		t.Fatalf("addSat wrapped: %v", at)
	}
}

package maintenance

import (
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// A mark's retry time saturates instead of wrapping.
func TestFleetAddSatSaturates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if at := table.SatAddTime(now, 1<<63-1); at.Before(now) {
		t.Fatalf("SatAddTime wrapped: %v", at)
	}
}

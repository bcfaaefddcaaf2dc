package catalog

import (
	"math"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// TestGraceSecondsBounded (issue 19 item 3): a registry row's
// grace_seconds near the int64 limit reads as table.MaxGrace, never as a
// wrapped (negative or short) duration; 0 and negative values are unset.
func TestGraceSecondsBounded(t *testing.T) {
	for secs, want := range map[int64]time.Duration{
		3600:                                  time.Hour,
		int64(table.MaxGrace / time.Second):   table.MaxGrace,
		int64(table.MaxGrace/time.Second) + 1: table.MaxGrace,
		math.MaxInt64 / int64(time.Second):    table.MaxGrace,
		math.MaxInt64/int64(time.Second) + 1:  table.MaxGrace, // the product wrapped
		math.MaxInt64:                         table.MaxGrace,
		0:                                     0,
		-5:                                    0,
		math.MinInt64:                         0,
	} {
		if got := graceOf(secs); got != want {
			t.Errorf("grace_seconds %d: %d, want %d", secs, got, want)
		}
	}
}

package awsfn_test

import (
	"testing"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	fleetpkg "github.com/tablekeep/tablekeep/shared/fleet"
)

// The fan-out's retry backoff is the fleet's one failure backoff in its
// jobs mode (no second policy).
func TestFanoutBackoffIsFleetJobsMode(t *testing.T) {
	if b := fleetpkg.BackoffOf(fleetpkg.ModeJobs); b.Base != awsfn.RetryBackoffBase || b.Max != awsfn.RetryBackoffMax {
		t.Fatalf("fleet jobs mode %v, fan-out %s to %s", b, awsfn.RetryBackoffBase, awsfn.RetryBackoffMax)
	}
}

package lance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/table"
)

// LeasesDir holds a Lance dataset's reader leases, in the sidecar (Lance
// readers, writers and cleanup never look there). The names are those of
// a tablekeep table's leases (table.LeaseName; docs/format.md).
const LeasesDir = SidecarDir + "leases/"

// LeaseDir is the dataset's lease directory, on the wall clock. A lease is
// checked against the dataset's manifests: the version exists, is at or
// above the floor, and is the latest or was written at most
// LeaseWindow ago (a Lance version's grace window starts at its own
// time; the policy's grace is at least table.DefaultGrace).
func (s *Source) LeaseDir() *table.LeaseDir {
	return s.LeaseDirAt(nil, nil)
}

// LeaseWindow is how recently a Lance version (not the latest) must have
// been written to be leased: table.DefaultGrace - table.SafetyMargin
// (docs/reliability.md, "Reader leases").
const LeaseWindow = table.DefaultGrace - table.SafetyMargin

// LeaseDirAt is LeaseDir with a clock (nil: the real one) and a logger.
func (s *Source) LeaseDirAt(clk clock.Clock, logger *slog.Logger) *table.LeaseDir {
	return &table.LeaseDir{
		Store: s.ds.store, Dir: s.ds.root + LeasesDir, Clock: clk, Logger: logger,
		Check: s.checkLeaseVersion, Floor: s.Floor,
	}
}

func (s *Source) checkLeaseVersion(ctx context.Context, v uint64, now time.Time) (uint64, error) {
	if v == 0 {
		return 0, fmt.Errorf("%w: version 0", table.ErrInvalidLease)
	}
	vfs, err := s.ds.ListVersions(ctx)
	if err != nil {
		return 0, err
	}
	if len(vfs) == 0 {
		return 0, fmt.Errorf("%s: no Lance manifest: %w", s.ds.root, table.ErrNotATable)
	}
	floor, err := s.Floor(ctx)
	if err != nil {
		return 0, err
	}
	latest := vfs[len(vfs)-1].Version
	if v > latest {
		return floor, fmt.Errorf("%w: version %d is in the future (latest %d)", table.ErrInvalidLease, v, latest)
	}
	if v < floor {
		return floor, fmt.Errorf("%s: %w: version %d is below the retention floor %d", s.ds.root, table.ErrVersionPruned, v, floor)
	}
	for _, vf := range vfs {
		if vf.Version != v {
			continue
		}
		if v != latest {
			if age := now.Sub(vf.LastModified); age > LeaseWindow {
				return floor, fmt.Errorf("%w: version %d was written %s ago (lease window %s): tag it to keep it", table.ErrLeaseWindow, v, age.Round(time.Second), LeaseWindow)
			}
		}
		return floor, nil
	}
	return floor, fmt.Errorf("%s: %w: version %d", s.ds.root, table.ErrVersionNotFound, v)
}

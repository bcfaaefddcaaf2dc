package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Maintain registers the demo table in a local warehouse (its parent
// directory) and runs one embedded maintenance pass: compaction under a lock
// file, prune planning into the in-process queue, draining by the cleaner
// (no lock held), and the orphan sweep.
func Maintain(ctx context.Context, d *Demo) error {
	out := d.Cfg.Out
	policy := maintenance.DefaultPolicy()
	fmt.Fprintf(out, "\nmaintenance: policy keep-last %d, grace %s, target %d rows per fragment; clock advanced %s to pass the grace window\n",
		policy.KeepLast, policy.Grace, policy.TargetRows, policy.Grace+time.Minute)
	abs, err := filepath.Abs(d.Cfg.Dir)
	if err != nil {
		return err
	}
	// The demo's versions are seconds old and maintenance keeps everything
	// superseded less than the grace window ago: act as if that hour passed.
	w, err := embedded.Open(ctx, filepath.Dir(abs), lock.AheadClock{Clock: clock.System(), Ahead: policy.Grace + time.Minute}, nil,
		func(objstore.Store) objstore.Store { return d.Store })
	if err != nil {
		return err
	}
	if err := w.Catalog.Register(ctx, "registry", d.Root, policy); err != nil {
		return err
	}
	rep, err := w.Maintain(ctx, embedded.Options{})
	if err != nil {
		return err
	}
	for _, tr := range rep.Run.Tables {
		if tr.Table != "registry" {
			continue
		}
		c := tr.Compacted
		fmt.Fprintf(out, "compaction: %d groups, %d fragments -> %d, %d rows rewritten, %d concurrent deletes remapped (fencing token %d)\n",
			c.Committed, c.InputFrags, c.OutputFrags, c.RowsWritten, c.Remapped, tr.Token)
		fmt.Fprintf(out, "prune: latest %d, floor %d, %d versions prunable, %d range messages\n",
			tr.Prune.Latest, tr.Prune.Floor, tr.Prune.Prunable, len(tr.Prune.Ranges))
	}
	sw := rep.Sweeps["registry"]
	fmt.Fprintf(out, "cleanup: %d messages handled with no lock held; sweep deleted %d orphans; maintenance took %s\n",
		rep.Drain.Succeeded, sw.Deleted, rep.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "(the compacted input files stay until the %d versions kept before the compaction age out; a later run removes them)\n",
		maintenance.DefaultPolicy().KeepLast-1)
	return nil
}

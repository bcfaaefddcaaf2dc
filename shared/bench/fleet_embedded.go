package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// embeddedIdle re-measures the table: an embedded warehouse on
// local disk with n small tables (one row each), two passes to settle,
// then a scheduled pass (fleet.Scheduler.Run) and a whole `tablekeep maintain`
// (embedded.Warehouse.Maintain: the pass, the cleanup drain and the orphan
// sweep of every table) with nothing written in between.
func embeddedIdle(ctx context.Context, workDir string, n int) (EmbeddedIdle, error) {
	dir := filepath.Join(workDir, fmt.Sprintf("fleet-embedded-%d", n))
	if err := os.RemoveAll(dir); err != nil {
		return EmbeddedIdle{}, err
	}
	defer os.RemoveAll(dir)
	cnt := (*objstore.Counting)(nil)
	w, err := embedded.Open(ctx, dir, nil, nil, func(s objstore.Store) objstore.Store { cnt = objstore.NewCounting(s); return cnt })
	if err != nil {
		return EmbeddedIdle{}, err
	}
	regs := make([]catalog.Registration, n)
	for i := range n {
		name := fleetName(i)
		tb, err := table.Create(ctx, w.Store, w.Catalog.TableRoot(name), fleetSchema, "name", table.Options{})
		if err != nil {
			return EmbeddedIdle{}, err
		}
		if err := fleetRow(tb, ctx, "k0"); err != nil {
			return EmbeddedIdle{}, err
		}
		regs[i] = catalog.Registration{Name: name, Rel: name, Policy: maintenance.DefaultPolicy()}
	}
	if err := w.Catalog.RegisterBatch(ctx, regs); err != nil {
		return EmbeddedIdle{}, err
	}
	for range 2 {
		if _, err := w.Maintain(ctx, embedded.Options{}); err != nil {
			return EmbeddedIdle{}, err
		}
	}
	r := w.NewRunner(warehouse.Options{Owner: "bench"})
	before := cnt.Counts()
	start := time.Now()
	rep, err := fleet.New(r, fleet.Options{}).Run(ctx)
	if err != nil {
		return EmbeddedIdle{}, err
	}
	e := EmbeddedIdle{Tables: n, Pass: time.Since(start), Skipped: rep.Idle}
	e.PerTable = perTable(cnt.Counts().Sub(before), float64(n))
	before = cnt.Counts()
	start = time.Now()
	if _, err := w.Maintain(ctx, embedded.Options{}); err != nil {
		return EmbeddedIdle{}, err
	}
	e.Maintain = time.Since(start)
	e.MaintainPerTable = perTable(cnt.Counts().Sub(before), float64(n))
	return e, nil
}

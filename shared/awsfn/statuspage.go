package awsfn

import (
	"context"
	"log/slog"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/statuspage"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// statusHistoryVersions is how many versions of _stats the compactor's
// status page reads for its charts (each a LIST and a GET, and the
// version's data files): fewer than `status --html` reads, as it runs
// every pass.
const statusHistoryVersions = 8

// statusPageTimeout bounds writing the page after a pass.
const statusPageTimeout = 20 * time.Second

// writeStatusPage writes the warehouse's status page after a scheduled
// pass (warehouse.StatusPageKey, docs/aws.md "Status page"): every
// registered table from its _stats row and history and its fleet mark (as
// this pass left them), the bucket's problems first. It reads _registry
// (one scan), the newest statusHistoryVersions versions of _stats and the
// fleet index (one LIST, a GET per shard holding marks: at most 256), then
// PUTs the page once. A failure is logged: the page is a report, the pass
// is done.
func (d *Deps) writeStatusPage(ctx context.Context, cat *catalog.Catalog, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusPageTimeout)
	defer cancel()
	p, err := d.statusPage(ctx, cat)
	var n int
	if err == nil {
		n, err = warehouse.WriteStatusPage(ctx, d.Store, cat.Root(), p)
	}
	if err != nil {
		log.WarnContext(ctx, "status page not written", "err", err)
		return
	}
	log.InfoContext(ctx, "status page written", "key", cat.Root()+warehouse.StatusPageKey, "bytes", n, "tables", len(p.Tables))
}

// statusPage is the page of the warehouse as it is now.
func (d *Deps) statusPage(ctx context.Context, cat *catalog.Catalog) (statuspage.Page, error) {
	now := d.Clock.Now()
	p := statuspage.Page{Warehouse: d.Config.Warehouse, Generated: now, Source: "the scheduled compactor", Notes: d.bucketNotes()}
	refs, err := cat.Tables(ctx)
	if err != nil {
		return p, err
	}
	hist, err := cat.StatsHistory(ctx, statusHistoryVersions)
	if err != nil {
		return p, err
	}
	idx, err := fleet.Read(ctx, d.Store, cat.Root())
	if err != nil {
		return p, err
	}
	for _, ref := range refs {
		h := hist[ref.Name]
		var st maintenance.TableStats
		if len(h) > 0 {
			st = h[len(h)-1].TableStats
		}
		m, ok := idx.Tables[ref.Name]
		p.Tables = append(p.Tables, warehouse.PageTable(ref, st, h, m, ok, now))
	}
	return p, nil
}

package cli

import (
	"context"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// steps are the maintenance steps a pass runs.
type steps = warehouse.Steps

var allSteps = warehouse.AllSteps

// passOptions configure one maintenance pass.
type passOptions struct {
	DryRun   bool
	Tables   []string // registered names; empty: every registered table
	Steps    steps
	Progress func(desc string, total int) progress.Bar
}

// passReport is one pass: what was (or, dry, would be) done per table.
type passReport = warehouse.Report

// pass runs maintenance over the named tables (every registered table if
// none), each whether in need or not, with the library the Lambda
// functions run (warehouse.Pass): the runner per table, the cleaner over
// the ranges (in-process, or the deployment's cleaner through its queue)
// and the sweep; a dry run also reports the kept versions and what
// compaction leaves.
func (w *whouse) pass(ctx context.Context, o passOptions) (passReport, error) {
	refs, err := w.refs(ctx, o.Tables)
	if err != nil {
		return passReport{Steps: o.Steps}, err
	}
	return w.Pass(ctx, warehouse.PassOptions{DryRun: o.DryRun, Exactly: true, Tables: refs, Steps: o.Steps,
		Progress: o.Progress, Detail: true, ErrorText: w.errorText})
}

// errorText is a table's error as the CLI reports it: one line, and for a
// Lance dataset the runner refuses after a LanceDB restore, why and what
// to do.
func (w *whouse) errorText(ctx context.Context, step string, ref maintenance.TableRef, err error) string {
	if step != "maintain" {
		return sdkOneLine(err)
	}
	w.Logger.ErrorContext(ctx, "maintenance failed", "table", ref.Name, "err", err.Error())
	if why := restoreBlocked(ctx, w.Store, ref.Root, err); why != "" {
		return why
	}
	return sdkOneLine(err)
}

// refs returns the registered tables named (all, in registry order, if none).
func (w *whouse) refs(ctx context.Context, names []string) ([]maintenance.TableRef, error) {
	if len(names) == 0 {
		return w.Catalog.Tables(ctx)
	}
	var out []maintenance.TableRef
	for _, n := range names {
		ref, err := w.resolve(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, ref)
	}
	return out, nil
}

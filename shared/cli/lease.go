package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// leaseTarget is the dataset a lease command works on: a tablekeep table
// or a Lance dataset, with its lease directory and latest version.
type leaseTarget struct {
	name   string
	dir    *table.LeaseDir
	latest func(context.Context) (uint64, error)
}

// openLeaseTarget opens what --table names: with --warehouse, a registered
// table (tablekeep or Lance, by its format); without, a location holding a
// tablekeep table or, failing that, a Lance dataset.
func openLeaseTarget(ctx context.Context, app *App, wf warehouseFlags) (*leaseTarget, error) {
	if wf.URI != "" {
		if app.TableURI == "" {
			return nil, Usagef("--table NAME is required with --warehouse")
		}
		w, err := openWarehouse(ctx, app, wf, openMode{})
		if err != nil {
			return nil, err
		}
		ref, err := w.resolve(ctx, app.TableURI)
		if err != nil {
			return nil, err
		}
		if ref.Format == catalog.FormatLance {
			return lanceTarget(app.TableURI, w.Store, ref.Root, w.Clock, app), nil
		}
		t, err := table.Open(ctx, w.Store, ref.Root, w.tableOptions())
		if err != nil {
			return nil, err
		}
		return tableTarget(app.TableURI, t), nil
	}
	t, err := app.OpenTable(ctx)
	if err == nil {
		return tableTarget(app.TableURI, t), nil
	}
	// A Lance dataset (what LanceDB writes), as describe does.
	store, root, serr := app.OpenStore(ctx, true)
	if serr != nil {
		return nil, err
	}
	if _, lerr := formats.Inspect(ctx, store, root); lerr != nil {
		return nil, err
	}
	return lanceTarget(app.TableURI, store, root, clock.System(), app), nil
}

func tableTarget(name string, t *table.Table) *leaseTarget {
	return &leaseTarget{name: name, dir: t.LeaseDir(), latest: func(context.Context) (uint64, error) {
		return t.Cached().Version, nil
	}}
}

func lanceTarget(name string, store objstore.Store, root string, clk clock.Clock, app *App) *leaseTarget {
	dir, latest := formats.LanceLeases(store, root, clk, app.Logger)
	return &leaseTarget{name: name, dir: dir, latest: latest}
}

// leaseErr turns a lease's bad input into a usage error.
// findLease finds lease id of the target; one it does not hold is an error
// naming the table, and how to list its leases.
func findLease(ctx context.Context, tg *leaseTarget, id string) (*table.Lease, error) {
	l, err := tg.dir.Find(ctx, id)
	if errors.Is(err, table.ErrLeaseNotFound) {
		return nil, fmt.Errorf("lease %s on %s: %w (tablekeep lease list lists its leases)", id, tg.name, table.ErrLeaseNotFound)
	}
	return l, leaseErr(err)
}

func leaseErr(err error) error {
	if errors.Is(err, table.ErrInvalidLease) {
		return &UsageError{Err: err}
	}
	return err
}

type leaseJSON struct {
	ID      string    `json:"id"`
	Table   string    `json:"table"`
	Version uint64    `json:"version"`
	Expires time.Time `json:"expires"`
	Live    *bool     `json:"live,omitempty"`
	Pins    bool      `json:"pins_floor,omitempty"` // the live lease on the lowest version
}

func newLeaseCmd(app *App) *cobra.Command {
	var wf warehouseFlags
	cmd := &cobra.Command{
		Use:   "lease create|renew|release|list",
		Short: "Reader leases: keep a version from being pruned while a long read runs",
		Long: "A lease keeps one version of a tablekeep table or a Lance dataset from being pruned until it\n" +
			"is released or expires (ttl at most " + table.MaxLeaseTTL.String() + "; at most " + fmt.Sprint(table.MaxLeases) + " live leases a table).\n" +
			"--table is a table location, or with --warehouse a registered name (tablekeep or Lance).",
	}
	cmd.PersistentFlags().StringVar(&wf.URI, "warehouse", "", "with --table NAME: the warehouse the table is registered in (s3://bucket/prefix or a local directory)")
	var version uint64
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create --table T [--version N] --ttl D",
		Short: "Take a lease on a version (default the latest); prints its id and expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("ttl") {
				return Usagef("--ttl is required (at most %s)", table.MaxLeaseTTL)
			}
			ctx := cmd.Context()
			tg, err := openLeaseTarget(ctx, app, wf)
			if err != nil {
				return err
			}
			v := version
			if v == 0 {
				if v, err = tg.latest(ctx); err != nil {
					return err
				}
			}
			l, err := tg.dir.Acquire(ctx, v, ttl)
			if err != nil {
				return leaseErr(err)
			}
			return printLease(app, tg, l)
		},
	}
	create.Flags().Uint64Var(&version, "version", 0, "version to lease (default: the latest)")
	create.Flags().Var((*dayDuration)(&ttl), "ttl", "how long the lease lasts unless renewed, e.g. 30m, 12h, 7d (at most "+daysText(table.MaxLeaseTTL)+")")
	renew := &cobra.Command{
		Use:   "renew ID --ttl D",
		Short: "Extend a lease to now + ttl",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("ttl") {
				return Usagef("--ttl is required (at most %s)", table.MaxLeaseTTL)
			}
			ctx := cmd.Context()
			tg, err := openLeaseTarget(ctx, app, wf)
			if err != nil {
				return err
			}
			l, err := findLease(ctx, tg, args[0])
			if err != nil {
				return err
			}
			if err := l.Renew(ctx, ttl); err != nil {
				return leaseErr(err)
			}
			return printLease(app, tg, l)
		},
	}
	renew.Flags().Var((*dayDuration)(&ttl), "ttl", "new ttl from now, e.g. 12h, 7d (at most "+daysText(table.MaxLeaseTTL)+")")
	release := &cobra.Command{
		Use:   "release ID",
		Short: "Release a lease: its version may be pruned from the next pass",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			tg, err := openLeaseTarget(ctx, app, wf)
			if err != nil {
				return err
			}
			l, err := findLease(ctx, tg, args[0])
			if err != nil {
				return err
			}
			if err := l.Release(ctx); err != nil {
				return err
			}
			if app.JSON() {
				return printJSON(app.Stdout, map[string]any{"released": l.ID(), "version": l.Version()})
			}
			_, err = fmt.Fprintf(app.Stdout, "released lease %s on version %d\n", l.ID(), l.Version())
			return err
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the leases of a table and what they pin",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			tg, err := openLeaseTarget(ctx, app, wf)
			if err != nil {
				return err
			}
			set, err := tg.dir.Read(ctx)
			if err != nil {
				return err
			}
			return printLeases(app, tg, set, tg.dir.Now())
		},
	}
	cmd.AddCommand(create, renew, release, list)
	return cmd
}

func printLease(app *App, tg *leaseTarget, l *table.Lease) error {
	if app.JSON() {
		return printJSON(app.Stdout, leaseJSON{ID: l.ID(), Table: tg.name, Version: l.Version(), Expires: l.Expires()})
	}
	_, err := fmt.Fprintf(app.Stdout, "lease %s on version %d of %s, expires %s\n", l.ID(), l.Version(), tg.name, l.Expires().Format(time.RFC3339))
	return err
}

// leaseRows is one row per lease id (its latest name), live or not, lowest
// version first; the pinning lease (at or above floor: 0 when the floor
// was not read) is marked.
func leaseRows(tg string, set table.LeaseSet, now time.Time, floor uint64) []leaseJSON {
	pin, pinned := set.Pin(now, floor)
	latest := map[string]table.LeaseInfo{}
	var order []string
	for _, n := range set.Names {
		o, ok := latest[n.ID]
		if !ok {
			order = append(order, n.ID)
		}
		if !ok || n.Expires.After(o.Expires) {
			latest[n.ID] = n
		}
	}
	var out []leaseJSON
	for _, id := range order {
		n := latest[id]
		live := n.Live(now)
		out = append(out, leaseJSON{ID: id, Table: tg, Version: n.Version, Expires: n.EffectiveExpiry(), Live: &live,
			Pins: pinned && pin.ID == id})
	}
	return out
}

func printLeases(app *App, tg *leaseTarget, set table.LeaseSet, now time.Time) error {
	rows := leaseRows(tg.name, set, now, 0)
	if app.JSON() {
		return printJSON(app.Stdout, map[string]any{"table": tg.name, "leases": rows, "malformed": len(set.Malformed)})
	}
	if len(rows) == 0 {
		fmt.Fprintf(app.Stdout, "no leases on %s\n", tg.name)
	}
	for _, r := range rows {
		state := "expired"
		if *r.Live {
			state = "live"
		}
		if r.Pins {
			state += ", pins the floor at or below " + fmt.Sprint(r.Version)
		}
		fmt.Fprintf(app.Stdout, "%s  version %d  expires %s  %s\n", r.ID, r.Version, r.Expires.Format(time.RFC3339), state)
	}
	if n := len(set.Malformed); n > 0 {
		fmt.Fprintf(app.Stdout, "%d malformed lease object(s) ignored (they pin nothing)\n", n)
	}
	return nil
}

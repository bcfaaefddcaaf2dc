package warehouse

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

type aheadClock struct{ off time.Duration }

func (c *aheadClock) Now() time.Time                             { return time.Now().Add(c.off) }
func (c *aheadClock) Sleep(context.Context, time.Duration) error { return nil }

// TestConstructorsWireOnce: the runner, the cleaner and the sweeper of a
// warehouse, local or on AWS, open datasets of every format
// (formats.Open), lock in the warehouse's namespace as its owner, and
// send cleanup to its queue, with nothing wired by the caller.
func TestConstructorsWireOnce(t *testing.T) {
	ctx := context.Background()
	local, err := OpenLocal(ctx, t.TempDir(), LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aws, err := OpenAWS(ctx, AWSConfig{URI: "s3://bucket-name/wh", Lease: time.Minute, LockWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if aws.Remote != nil || aws.Queue == nil || aws.Locker != nil || aws.Catalog != nil || aws.Root != "wh" {
		t.Fatalf("OpenAWS without lock table and queue: %+v", aws)
	}
	for _, c := range []struct {
		w  *Warehouse
		ns string
	}{{local, ""}, {aws, "s3://bucket-name/wh/"}} {
		if c.w.Owner == "" && c.w == local {
			t.Error("local warehouse without an owner")
		}
		r := c.w.NewRunner(Options{Owner: "me", DryRun: true})
		if r.Sources == nil || r.Owner != "me" || r.LockNamespace != c.ns || r.Store != c.w.Store || !r.DryRun || r.Compactor == nil {
			t.Errorf("%s: runner %+v", c.w.URI, r)
		}
		if r := c.w.NewRunner(Options{}); r.Owner != c.w.Owner || r.Lease != c.w.Lease || r.LockWait != c.w.LockWait {
			t.Errorf("%s: runner owner %q lease %s wait %s", c.w.URI, r.Owner, r.Lease, r.LockWait)
		}
		if cl := c.w.NewCleaner(Options{}); cl.Sources == nil || cl.Store != c.w.Store || cl.OpenOpts.Clock == nil {
			t.Errorf("%s: cleaner %+v", c.w.URI, cl)
		}
		if s := c.w.NewSweeper(Options{MaxDeletes: 7}); s.Options.Sources == nil || s.Options.MaxDeletes != 7 || s.Options.Table.Clock == nil {
			t.Errorf("%s: sweeper %+v", c.w.URI, s.Options)
		}
	}
}

// TestPassDrainsLocallyOrLeavesRangesOnTheRemoteQueue: one Pass over the
// tables named (Exactly) plans the same ranges dry and real; locally the
// real pass drains them and reports what it deleted per table; with a
// Remote queue it leaves them there and drains nothing.
func TestPassDrainsLocallyOrLeavesRangesOnTheRemoteQueue(t *testing.T) {
	ctx := context.Background()
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprint("remote=", remote), func(t *testing.T) {
			clk := &aheadClock{}
			w, err := OpenLocal(ctx, t.TempDir(), LocalOptions{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			schema := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}}, nil)
			tb, err := table.Create(ctx, w.Store, "tables/t", schema, "name", table.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Catalog.Register(ctx, "t", "tables/t", maintenance.Policy{KeepLast: 2}); err != nil {
				t.Fatal(err)
			}
			for i := range 30 {
				b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
				b.Field(0).(*array.StringBuilder).Append(fmt.Sprint("k", i%5))
				if _, err := tb.Upsert(ctx, b.NewRecordBatch()); err != nil {
					t.Fatal(err)
				}
				b.Release()
			}
			var rq *queue.Embedded
			if remote {
				rq = queue.NewEmbedded(queue.EmbeddedOptions{Clock: clk})
				w.Remote = rq
			}
			clk.off = 2 * time.Hour
			ref, err := w.Catalog.Resolve(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			dry, err := w.Pass(ctx, PassOptions{DryRun: true, Exactly: true, Tables: []maintenance.TableRef{ref}, Detail: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(dry.Cleanup["t"]) == 0 || dry.Kept["t"] == nil || dry.Cleaned != nil {
				t.Fatalf("dry run: cleanup %v kept %v cleaned %v", dry.Cleanup, dry.Kept, dry.Cleaned)
			}
			rep, err := w.Pass(ctx, PassOptions{Exactly: true, Tables: []maintenance.TableRef{ref}})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Run.Tables) != 1 || len(rep.Run.Tables[0].Prune.Ranges) != len(dry.Cleanup["t"]) {
				t.Fatalf("real run %+v, dry run planned %d ranges", rep.Run.Tables, len(dry.Cleanup["t"]))
			}
			ranges := len(rep.Run.Tables[0].Prune.Ranges)
			if _, ok := rep.Sweeps["t"]; !ok {
				t.Error("not swept")
			}
			if remote {
				n := rq.Len()
				if rep.Enqueued != ranges || n != ranges || rep.Cleaned != nil || rep.Drain.Received != 0 {
					t.Errorf("remote: enqueued %d, queue holds %d, want %d; cleaned %v, drained %+v", rep.Enqueued, n, ranges, rep.Cleaned, rep.Drain)
				}
				return
			}
			if rep.Drain.Succeeded != ranges || rep.Cleaned["t"] == nil || rep.Cleaned["t"].Versions == 0 || rep.Enqueued != 0 {
				t.Errorf("local: drained %+v of %d ranges, cleaned %+v", rep.Drain, ranges, rep.Cleaned["t"])
			}
		})
	}
}

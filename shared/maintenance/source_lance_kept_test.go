package maintenance_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// TestRunnerReportsKeptDeletions is issue 30 point 1: a LanceDB dataset
// with a FixedSizeList vector column and every tenth row deleted. The
// first maintenance folds its two fragments, keeping the deleted rows; the
// second commits nothing. Both say why: CompactionResult.DeletedKept and
// DeletedKeptReason, the compaction step's log line (deleted_kept,
// deleted_kept_reason) and the metric CompactionDeletedKept.
func TestRunnerReportsKeptDeletions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	lancetest.Node(t, nil, nil, "vecdel", wh, "ds", "100", "2")
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Now())
	ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Format: formats.Lance,
		Policy: maintenance.Policy{Grace: time.Hour, KeepLast: 1, RangeVersions: 8, DeletedThreshold: 0.05}}
	var logs, emf bytes.Buffer
	r := &maintenance.Runner{Store: store, Catalog: &memCatalog{refs: []maintenance.TableRef{ref}}, Locker: lock.NewInProcess(clock),
		Queue: maintenance.QueueEnqueuer{Q: queue.NewEmbedded(queue.EmbeddedOptions{})}, Clock: clock, Owner: "test",
		Sources: formats.Open, KeepAlive: -1, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Metrics: telemetry.New(&emf, clock, "Function", "test")}
	for pass, committed := range []int{1, 0} {
		rep, err := r.MaintainTable(ctx, ref)
		c := rep.Compacted
		if err != nil || rep.CompactionError != "" || c.Committed != committed || c.DeletedKept != 20 || !strings.Contains(c.DeletedKeptReason, "cannot be dropped") {
			t.Fatalf("pass %d: %+v %v %q", pass, c, err, rep.CompactionError)
		}
		l := stepLines(t, &logs)["compaction"]
		if len(l) != 1 || l[0]["deleted_kept"] != float64(20) || !strings.Contains(l[0]["deleted_kept_reason"].(string), "cannot be dropped") {
			t.Fatalf("pass %d: compaction log line %v", pass, l)
		}
		if committed == 0 && len(c.Versions) != 0 {
			t.Fatalf("pass %d committed versions %v", pass, c.Versions)
		}
	}
	if v := r.Metrics.Values()[telemetry.CompactionDeletedKept]; v != 40 {
		t.Fatalf("metric %s = %v, want 40 (20 a pass)", telemetry.CompactionDeletedKept, v)
	}
}

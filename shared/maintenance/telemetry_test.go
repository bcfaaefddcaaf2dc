package maintenance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// waitingLocker makes every Acquire take wait on the fake clock: a scripted
// lock wait with an exact duration.
type waitingLocker struct {
	lock.Locker
	clock *fakeClock
	wait  time.Duration
}

func (l waitingLocker) Acquire(ctx context.Context, name string, o lock.AcquireOptions) (*lock.Lease, error) {
	if strings.HasPrefix(name, "table/") {
		l.clock.Advance(l.wait)
	}
	return l.Locker.Acquire(ctx, name, o)
}

type logLine map[string]any

func (l logLine) num(path string) float64 {
	var cur any = map[string]any(l)
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return -1
		}
		cur = m[p]
	}
	f, ok := cur.(float64)
	if !ok {
		return -1
	}
	return f
}

func stepLines(t *testing.T, buf *bytes.Buffer) map[string][]logLine {
	t.Helper()
	out := map[string][]logLine{}
	for _, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("not a JSON log line: %q", raw)
		}
		if l["msg"] == "maintenance step" {
			out[l["step"].(string)] = append(out[l["step"].(string)], l)
		}
	}
	buf.Reset()
	return out
}

func parseEMF(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatalf("EMF line %q: %v", line, err)
	}
	if _, ok := doc["_aws"]; !ok {
		t.Fatalf("EMF line without _aws: %s", line)
	}
	return doc
}

// TestStepLogsAndMetrics scripts one table through maintenance and checks
// each step's log line (slog JSON) and the exact EMF metric values: a lock
// wait of 2.5 s, a compaction of 6 one-row fragments, a prune of versions
// 1-11, a cleaner that deletes 5 data files and 23 manifests/change
// records, a malformed message, one orphan swept, then a second run whose
// lease expires mid-compaction (lock lost).
func TestStepLogsAndMetrics(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{MaxReceives: 5})
	var logs, emf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	m := telemetry.New(&emf, e.clock, "Function", "test")
	e.runner.Logger, e.runner.Metrics = logger, m
	e.runner.Locker = waitingLocker{Locker: e.locker, clock: e.clock, wait: 2500 * time.Millisecond}
	e.clean.Logger, e.clean.Metrics = logger, m

	tb := e.create(t)
	for round := range 2 { // versions 2-7 create a-f; 8-13 replace them
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			upsert(t, tb, n, fmt.Sprintf("row-data-%s-%d", n, round))
		}
	}
	e.clock.Advance(2 * time.Hour)
	tr, err := e.runner.MaintainTable(ctx, e.ref)
	if err != nil {
		t.Fatal(err)
	}
	steps := stepLines(t, &logs)
	comp, prune, stats := steps["compaction"], steps["prune plan"], steps["stats refresh"]
	if len(comp) != 1 || len(prune) != 1 || len(stats) != 1 {
		t.Fatalf("want one line per step, got %v", steps)
	}
	after := e.open(t).Cached()
	if len(after.Fragments) != 1 || after.Version != 14 {
		t.Fatalf("after compaction: version %d, %d fragments", after.Version, len(after.Fragments))
	}
	outBytes := after.Fragments[0].Bytes
	for _, c := range []struct {
		l     logLine
		field string
		want  float64
	}{
		{comp[0], "fencing_token", float64(tr.Token)},
		{comp[0], "versions.from", 13},
		{comp[0], "versions.to", 14},
		{comp[0], "versions.latest", 14},
		{comp[0], "groups_committed", 1},
		{comp[0], "fragments_in", 6},
		{comp[0], "rows", 6},
		{comp[0], "bytes", float64(outBytes)},
		{comp[0], "lock_wait_ms", 2500},
		{comp[0], "requests.delete", 0},
		{prune[0], "versions.latest", 14},
		{prune[0], "versions.floor", 12},
		{prune[0], "versions.from", 1},
		{prune[0], "versions.to", 11},
		{prune[0], "prunable", 11},
		{prune[0], "requests.put", 2}, // the floor and the prune state
		{stats[0], "unreclaimed", 11},
		{stats[0], "small_fragments", 1},
	} {
		if got := c.l.num(c.field); got != c.want {
			t.Errorf("%s %s = %v, want %v", c.l["step"], c.field, got, c.want)
		}
	}
	if tr.Token == 0 || comp[0]["table"] != tblName || comp[0].num("requests.put") < 2 || comp[0].num("requests.get") < 1 ||
		comp[0].num("duration_ms") < 0 {
		t.Errorf("compaction line %v", comp[0])
	}

	// What the cleaner will delete, sized from the disk before it runs.
	want := int64(0)
	var wantKeys []string
	for v := uint64(1); v <= 11; v++ {
		wantKeys = append(wantKeys, table.ManifestKey(v))
	}
	for v := uint64(1); v <= 12; v++ {
		wantKeys = append(wantKeys, table.ChangeKey(v))
	}
	disk := listing(t, e.disk, e.ref.Root)
	dataBefore := 0
	for k := range disk {
		if strings.HasPrefix(k, e.ref.Root+table.DataPrefix) {
			dataBefore++
		}
	}
	for _, k := range wantKeys {
		want += disk[e.ref.Root+k]
	}
	if st := e.drain(t); st.Succeeded != 1 {
		t.Fatalf("drain: %+v", st)
	}
	diskAfter := listing(t, e.disk, e.ref.Root)
	for k, size := range disk {
		if _, ok := diskAfter[k]; !ok && strings.HasPrefix(k, e.ref.Root+table.DataPrefix) {
			want += size
		}
	}
	// A malformed message fails (and is counted).
	if _, err := e.clean.Clean(ctx, []byte(`{"v":1}`)); err == nil {
		t.Fatal("malformed message accepted")
	}
	steps = stepLines(t, &logs)
	cl := steps["cleanup"]
	if len(cl) != 2 {
		t.Fatalf("cleanup lines: %v", cl)
	}
	for _, c := range []struct {
		field string
		want  float64
	}{
		{"versions.from", 1}, {"versions.to", 11}, {"data_keys", 5}, {"manifest_keys", 23}, {"versions_deleted", 11},
		{"requests.delete", 2}, {"requests.delete_keys", 28}, {"requests.get", 12}, // 11 change records and the latest manifest (the latest-version guard, issue 19; floor and tags are LISTs)
		{"bytes", float64(want)},
	} {
		if got := cl[0].num(c.field); got != c.want {
			t.Errorf("cleanup %s = %v, want %v", c.field, got, c.want)
		}
	}
	if cl[1]["level"] != "ERROR" || cl[1]["err"] == nil {
		t.Errorf("failed cleanup line %v", cl[1])
	}

	// An orphan (a data file no version references), old enough to sweep.
	if err := e.disk.Put(ctx, e.ref.Root+table.DataPrefix+"00000000deadbeef.parquet", bytes.Repeat([]byte{1}, 100)); err != nil {
		t.Fatal(err)
	}
	sr, err := maintenance.SweepTable(ctx, e.faulty, e.ref, maintenance.SweepOptions{
		Now: e.clock.Now(), Logger: logger, Clock: e.clock, Metrics: m, Table: e.opts(),
	})
	if err != nil || sr.Deleted != 1 || sr.Bytes != 100 {
		t.Fatalf("sweep: %+v %v", sr, err)
	}
	sw := stepLines(t, &logs)["sweep"]
	if len(sw) != 1 || sw[0].num("deleted") != 1 || sw[0].num("bytes") != 100 || sw[0].num("versions.floor") != 12 ||
		sw[0].num("versions.latest") != 14 || sw[0].num("requests.delete") != 1 || sw[0].num("requests.list") < 2 {
		t.Errorf("sweep line %v", sw)
	}

	// Second run: the lease (5 min) expires during compaction.
	for _, n := range []string{"g", "h"} {
		upsert(t, e.open(t), n, "row-data-"+n)
	}
	e.runner.Locker = e.locker
	e.faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindPut && strings.Contains(op.Key, table.DataPrefix) {
			e.clock.Advance(10 * time.Minute)
		}
		return nil
	})
	if _, err := e.runner.MaintainTable(ctx, e.ref); !errors.Is(err, lock.ErrLeaseExpired) && !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("lease not lost: %v", err)
	}
	e.faulty.SetBefore(nil)
	if l := stepLines(t, &logs)["compaction"]; len(l) != 1 || l[0]["level"] != "ERROR" {
		t.Errorf("failed compaction line %v", l)
	}

	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	if strings.Count(emf.String(), "\n") != 1 {
		t.Fatalf("want one EMF line, got %q", emf.String())
	}
	doc := parseEMF(t, emf.Bytes())
	wantM := map[string]float64{
		telemetry.LockWait:            2500,
		telemetry.LockLost:            1,
		telemetry.CompactionGroups:    1,
		telemetry.CompactionRows:      6,
		telemetry.CompactionBytes:     float64(outBytes),
		telemetry.UnreclaimedVersions: 11,
		telemetry.SmallFragments:      1,
		telemetry.VersionsPruned:      11,
		telemetry.ObjectsDeleted:      28 + 1,
		telemetry.BytesDeleted:        float64(want + 100),
		telemetry.MessagesFailed:      1,
	}
	for name, v := range wantM {
		if doc[name] != v {
			t.Errorf("metric %s = %v, want %v", name, doc[name], v)
		}
	}
	if len(doc) != len(wantM)+2 { // + _aws and the Function dimension
		t.Errorf("unexpected metrics in %s", emf.String())
	}
	if dataBefore == 0 || strings.Contains(logs.String(), "row-data") {
		t.Error("row data in the logs")
	}
}

package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// typicalMark is a mark as a maintenance writes it (a table with pending
// work and small fragments waiting: every usual field set).
func typicalMark(i int, now time.Time) Mark {
	at := now.Add(time.Duration(i) * time.Millisecond)
	return Mark{Root: fmt.Sprintf("wh/t%06d/", i), Latest: 1234, Floor: 1180, Checked: at, Updated: at,
		Due: at.Add(time.Hour), DueReason: "small fragments waiting", Pending: 1, ReplanAt: at.Add(6 * time.Hour),
		PrunableAt: at.Add(40 * time.Minute), CompactFrags: 12, CompactSince: at}
}

// Issue 19 item 5, growth with the fleet: what one maintenance rewrites is
// one shard (~1/256 of the marks), not the whole index. At 10,000 tables a
// shard object is ~16 KB (the single object was ~3.5 MB); at 100,000 ~155
// KB (35 MB). The scan reads the index with one LIST page and at most 256
// GETs whatever the number of tables.
func TestFleetIndexBytesPerMaintenance(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC)
	for _, tc := range []struct {
		tables   int
		maxShard int // bytes, asserted
	}{{10_000, 24 << 10}, {100_000, 200 << 10}} {
		shards := map[int]*Shard{}
		all := map[string]Mark{}
		for i := range tc.tables {
			name := fmt.Sprintf("t%06d", i)
			sh := ShardOf(name, Shards)
			if shards[sh] == nil {
				shards[sh] = &Shard{V: indexVersion, Shard: sh, Seq: 12345, Written: now, Tables: map[string]Mark{}}
			}
			m := typicalMark(i, now)
			shards[sh].Tables[name] = m
			all[name] = m
		}
		var total, biggest int
		for _, s := range shards {
			b, _ := json.Marshal(s)
			total += len(b)
			biggest = max(biggest, len(b))
		}
		whole, _ := json.Marshal(map[string]any{"v": 1, "seq": 12345, "written": now, "tables": all})
		mean := total / len(shards)
		t.Logf("%d tables: one maintenance rewrites one shard: mean %d B, max %d B (the single index object: %d B); %d shards",
			tc.tables, mean, biggest, len(whole), len(shards))
		if len(shards) != Shards || biggest > tc.maxShard {
			t.Fatalf("%d tables: %d shards, biggest %d B, want %d shards and at most %d B", tc.tables, len(shards), biggest, Shards, tc.maxShard)
		}
	}
}

// The requests of the index at 10,000 tables: reading it (a scan) is one
// LIST page of the shards' folder (two objects per shard at most: 512
// keys) and 256 GETs; writing one shard (a maintenance with the scan's
// base) is one PUT, one LIST (is it the newest?) and one DELETE (the
// object two below); without a base (a job), one LIST and one GET more.
func TestFleetIndexRequestsAt10000Tables(t *testing.T) {
	ctx := context.Background()
	disk, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cnt := objstore.NewCounting(disk)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	updates := map[string]Mark{}
	for i := range 10_000 {
		updates[fmt.Sprintf("t%06d", i)] = typicalMark(i, now)
	}
	// Two generations of every shard (the newest and the one below).
	// (The first write makes the layout: 10,000 tables take 256 shards.)
	for _, base := range []*Index{NewIndex(), nil} {
		if _, err := Write(ctx, cnt, "wh/", base, updates, nil, nil, now); err != nil {
			t.Fatal(err)
		}
	}
	before := cnt.Counts()
	idx, err := Read(ctx, cnt, "wh/")
	if err != nil {
		t.Fatal(err)
	}
	read := cnt.Counts().Sub(before)
	if len(idx.Tables) != 10_000 || read != (objstore.Counts{List: 1, Get: Shards}) {
		t.Fatalf("reading the index of 10,000 tables: %d marks, %v; want 1 LIST and %d GETs", len(idx.Tables), read, Shards)
	}
	one := map[string]Mark{"t000042": typicalMark(42, now.Add(time.Hour))}
	before = cnt.Counts()
	if _, err := Write(ctx, cnt, "wh/", idx, one, nil, nil, now); err != nil {
		t.Fatal(err)
	}
	write := cnt.Counts().Sub(before)
	if write != (objstore.Counts{Put: 1, List: 1, DeleteRequests: 1, DeleteKeys: 1}) {
		t.Fatalf("one maintenance's index write (scan's base): %v, want PUT 1, LIST 1, DELETE 1", write)
	}
	before = cnt.Counts()
	if _, err := Write(ctx, cnt, "wh/", nil, one, nil, nil, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if job := cnt.Counts().Sub(before); job != (objstore.Counts{Get: 1, Put: 1, List: 2, DeleteRequests: 1, DeleteKeys: 1}) {
		t.Fatalf("one job's index write (no base): %v, want GET 1, PUT 1, LIST 2, DELETE 1", job)
	}
	t.Logf("10,000 tables: index read %v; one maintenance's write %v", read, write)
}

// The one failure backoff: base doubled per consecutive failure, capped,
// saturating (no overflow for any k or base); compaction's backoff is held
// strictly before its retry time and tried at it.
func TestFailureBackoffPolicy(t *testing.T) {
	for _, tc := range []struct {
		k          int
		base, most time.Duration
		want       time.Duration
	}{
		{0, time.Minute, time.Hour, time.Minute}, {1, time.Minute, time.Hour, time.Minute}, {2, time.Minute, time.Hour, 2 * time.Minute},
		{7, time.Minute, time.Hour, time.Hour}, {1 << 30, time.Minute, time.Hour, time.Hour},
		{3, 15 * time.Minute, 6 * time.Hour, time.Hour}, {6, 15 * time.Minute, 6 * time.Hour, 6 * time.Hour},
		{64, 1<<62 - 1, 1<<63 - 1, 1<<63 - 1}, {2, 1 << 62, 1<<63 - 1, 1<<63 - 1},
	} {
		if got := (Backoff{Base: tc.base, Max: tc.most}).Delay(tc.k); got != tc.want {
			t.Errorf("Backoff{%s, %s}.Delay(%d) = %s, want %s", tc.base, tc.most, tc.k, got, tc.want)
		}
	}
	if p, j := BackoffOf(ModePass), BackoffOf(ModeJobs); p != (Backoff{15 * time.Minute, 6 * time.Hour}) || j != (Backoff{time.Minute, time.Hour}) {
		t.Fatalf("modes: pass %v, jobs %v", p, j)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := Mark{CompactFailures: 1, CompactRetryAt: now}
	if !m.CompactHeld(now.Add(-time.Nanosecond)) || m.CompactHeld(now) {
		t.Fatal("compaction must be held strictly before its retry time and tried at it")
	}
}

// Keys near the integer limits: a forged index object at the largest
// sequence numbers is a stray or refused with a clear error, never wraps.
func TestFleetShardKeyLimits(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
		seq uint64
	}{
		{fmt.Sprintf("wh/_fleet/index/0a/%020d.json", uint64(1<<64-1-5)), true, 5},
		{"wh/_fleet/index/0a/18446744073709551615.json", false, 0}, // seq 0
		{"wh/_fleet/index/0a/00000000000000000000.json", false, 0}, // seq 2^64-1
		{fmt.Sprintf("wh/_fleet/index/0a/%020d.json", uint64(1<<63)), true, 1<<63 - 1},
		{fmt.Sprintf("wh/_fleet/index/0a/%020d.json", uint64(1<<63-1)), false, 0}, // seq 2^63
		{"wh/_fleet/index/0A/18446744073709551610.json", false, 0},
		{"wh/_fleet/index/0a/1844674407370955161x.json", false, 0},
		{"wh/_fleet/index/0a/!x", false, 0},
		{"wh/_fleet/index/", false, 0},
	} {
		sh, seq, ok := ParseShardKey("wh/", tc.key)
		if ok != tc.ok || (ok && (seq != tc.seq || sh != 10)) {
			t.Errorf("%s: shard %d seq %d ok %v, want seq %d ok %v", tc.key, sh, seq, ok, tc.seq, tc.ok)
		}
	}
	base := &Shard{V: indexVersion, Shard: 3, Seq: MaxSeq, Tables: map[string]Mark{}}
	disk, _ := objstore.NewDisk(t.TempDir())
	if _, err := WriteShard(context.Background(), disk, "wh/", Legacy256, 3, base, nil, nil, time.Now()); err == nil {
		t.Fatal("a write past the largest sequence number was not refused")
	}
}

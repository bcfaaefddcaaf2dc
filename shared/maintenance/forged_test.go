package maintenance_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// forgeChange encodes a change record as docs/format.md specifies (the
// package's encoder is unexported): a forger with write access to the
// table's _changes/ can produce exactly this.
func forgeChange(c *dataset.ChangeRecord) []byte {
	b := append([]byte("TKC1"), 1)
	b = binary.AppendUvarint(b, c.Version)
	b = binary.AppendVarint(b, c.CommitTime.UnixNano())
	b = append(b, byte(c.Op))
	b = binary.AppendUvarint(b, uint64(len(c.Added)))
	for _, k := range c.Added {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Removed)))
	for _, rf := range c.Removed {
		b = binary.AppendUvarint(b, uint64(len(rf.Key)))
		b = append(b, rf.Key...)
		b = binary.AppendUvarint(b, rf.Since)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// TestForgedChangeRecord: a change record forged to name a key outside the
// table's data files (another table's data, a path with "..", an absolute
// path, the table's own manifests or refs) makes the cleaner refuse the
// whole range permanently and delete nothing, not even the legitimate keys
// listed before the forged one.
func TestForgedChangeRecord(t *testing.T) {
	ctx := context.Background()
	p := crashPolicy()
	h := buildHistory(t, p).withCleanupPending(t, p)
	first, err := maintenance.DecodeRangeMessage(h.bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	const other = "wh/other/data/0000000000000001.parquet"
	forged := []string{
		"../other/data/0000000000000001.parquet",
		"/wh/other/data/0000000000000001.parquet",
		"/" + other,
		other, // relative to the root: not a data key of this format
		"data/../../other/data/0000000000000001.parquet",
		"data/0000000000000001.parquet/../../_refs/floor.json",
		"data/../_versions/" + table.ManifestKey(1)[len("_versions/"):],
		table.ManifestKey(first.To + 5),
		"_refs/floor.json",
		"data/00000000000000zz.parquet",
		"data/0000000000000001.parquet\x00",
		"",
	}
	for _, key := range forged {
		dir := filepath.Join(t.TempDir(), "s")
		copyDir(t, h.dir, dir)
		e := newEnv(t, dir, p, queue.EmbeddedOptions{})
		e.clock.Advance(2 * time.Hour)
		if err := e.disk.Put(ctx, other, []byte("another table's data")); err != nil {
			t.Fatal(err)
		}
		tb := e.open(t)
		// The first change record of the range that removes something.
		var cr *dataset.ChangeRecord
		var r uint64
		for r = first.From + 1; r <= first.To+1; r++ {
			if cr, err = tb.ChangeRecord(ctx, r); err != nil {
				t.Fatal(err)
			}
			if len(cr.Removed) > 0 {
				break
			}
		}
		if len(cr.Removed) == 0 {
			t.Fatalf("range [%d, %d] removes nothing", first.From, first.To)
		}
		cr.Removed = append(cr.Removed, dataset.RemovedFile{Key: key, Since: first.From})
		if err := e.disk.Put(ctx, tb.Root()+table.ChangeKey(r), forgeChange(cr)); err != nil {
			t.Fatal(err)
		}
		before := listing(t, e.disk, "")
		_, err = e.clean.Clean(ctx, h.bodies[0])
		if !errors.Is(err, maintenance.ErrForeignKey) || !errors.Is(err, queue.ErrPermanent) {
			t.Errorf("forged key %q: %v, want ErrForeignKey and queue.ErrPermanent", key, err)
		}
		if err := sameListing(before, listing(t, e.disk, "")); err != nil {
			t.Errorf("forged key %q: cleaner deleted something: %v", key, err)
		}
		// Through the queue: dead-lettered at once, never retried.
		send(t, e.q, [][]byte{h.bodies[0]})
		if st := e.drain(t); st.DeadLettered != 1 || st.Received != 1 {
			t.Errorf("forged key %q: drain %+v, want one delivery, dead-lettered", key, st)
		}
	}
}

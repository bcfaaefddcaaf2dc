package table

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// storedFormat is the manifest format field of version v as stored: the
// uvarint right after the magic, which every release reads before the
// checksum and refuses when it is above what the release knows
// (docs/format.md 4.4 step 2).
func storedFormat(t *testing.T, st objstore.Store, root string, v uint64) uint64 {
	t.Helper()
	b, err := st.Get(context.Background(), root+"/"+manifestKey(v))
	if err != nil {
		t.Fatal(err)
	}
	fv, n := binary.Uvarint(b[len(manifestMagic):])
	if n <= 0 {
		t.Fatalf("version %d: no format field", v)
	}
	return fv
}

// releaseBeforeFormat3Refuses is the check every release before format 3
// made first on every manifest it opened (reading or writing): format
// versions 1 and 2 only, anything else ErrUnsupportedFormat, before the
// checksum and before any write.
func releaseBeforeFormat3Refuses(fv uint64) bool { return fv < 1 || fv > 2 }

// TestFormat3IsTheDefault: Create with zero Options writes format 3 (with
// the default inline bound recorded); every kind of commit on it keeps
// format 3 in the stored format field, so a release before format 3
// refuses every version of the table; Format 2 is still created on request
// and an existing format-2 table keeps format 2 under a default handle.
func TestFormat3IsTheDefault(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)}))
	if m := tbl.Cached(); m.Format != 3 || m.InlineMaxBytes != DefaultInlineMaxBytes {
		t.Fatalf("default create: format %d, inline bound %d", m.Format, m.InlineMaxBytes)
	}
	var rows []row
	for i := range 100 {
		rows = append(rows, regRow(i))
	}
	upsertRows(t, tbl, rows...)                             // a data file
	upsertRows(t, tbl, regRow(200), regRow(3))              // inline rows, an inline deletion
	must(tbl.Delete(ctx, regRow(200).Name, regRow(4).Name)) // inline delete of both kinds
	must(tbl.FlushInline(ctx))
	compactAll(t, tbl)
	must(tbl.Restore(ctx, 3))
	must(tbl.AddColumns(ctx, arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}))
	last := tbl.Cached().Version
	for v := uint64(1); v <= last; v++ {
		if fv := storedFormat(t, st, "t", v); fv != 3 || !releaseBeforeFormat3Refuses(fv) {
			t.Errorf("version %d: stored format %d, want 3 (refused by releases before format 3)", v, fv)
		}
	}

	// Format 2 on request; a default handle on it keeps format 2.
	old := must(Create(ctx, st, "old", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil), Format: 2}))
	upsertRows(t, old, regRow(1))
	h := must(Open(ctx, st, "old", Options{Clock: fakeclock.NoSleep(nil)}))
	upsertRows(t, h, regRow(2))
	for v := uint64(1); v <= h.Cached().Version; v++ {
		if fv := storedFormat(t, st, "old", v); fv != 2 || releaseBeforeFormat3Refuses(fv) {
			t.Errorf("format-2 table, version %d: stored format %d, want 2", v, fv)
		}
	}
	if h.Cached().Format >= 3 || len(h.Cached().Inline) != 0 {
		t.Errorf("format-2 table wrote inline rows under a default handle")
	}
	for _, f := range []uint64{1, 4} {
		if _, err := Create(ctx, st, "bad", regSchema, "name", Options{Format: f}); !errors.Is(err, ErrUnsupportedFormat) {
			t.Errorf("create format %d: %v, want ErrUnsupportedFormat", f, err)
		}
	}
}

// TestNewerFormatRefusesThisWriter: the refusal an old writer meets on a
// format-3 table, one format up: a table whose latest manifest is format 4
// (otherwise well formed and sealed) is refused by this build's open,
// writes and time travel with ErrUnsupportedFormat naming the manifest and
// the formats this build reads, and nothing is written.
func TestNewerFormatRefusesThisWriter(t *testing.T) {
	ctx := context.Background()
	mem := newMemStore()
	tbl := must(Create(ctx, mem, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)}))
	upsertRows(t, tbl, regRow(1))
	// Version 3 as a newer release would write it: format field 4.
	m := *tbl.Cached()
	m.Version, m.Parent = 3, 2
	body := encodeManifest(&m)
	body = body[:len(body)-4]
	if body[len(manifestMagic)] != 3 {
		t.Fatalf("format byte %d", body[len(manifestMagic)])
	}
	body[len(manifestMagic)] = 4
	if err := mem.PutIfAbsent(ctx, "t/"+manifestKey(3), seal(body)); err != nil {
		t.Fatal(err)
	}
	cnt := objstore.NewCounting(mem)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrUnsupportedFormat) || !strings.Contains(err.Error(), manifestKey(3)) || !strings.Contains(err.Error(), "reads 1 to 3") {
			t.Errorf("%s: %v, want ErrUnsupportedFormat naming version 3's manifest", what, err)
		}
	}
	_, err := Open(ctx, cnt, "t", Options{Clock: fakeclock.NoSleep(nil)})
	check("open", err)
	w := &Table{store: cnt, root: "t/", opts: Options{Clock: fakeclock.NoSleep(nil)}.withDefaults()}
	rec := regBatch(regRow(2))
	_, err = w.Upsert(ctx, rec)
	rec.Release()
	check("upsert", err)
	_, err = w.Delete(ctx, regRow(1).Name)
	check("delete", err)
	if c := cnt.Counts(); c.Put != 0 || c.DeleteRequests != 0 {
		t.Errorf("refused writers wrote: %s", c)
	}
	// A warm handle (version 2 cached) conflicts on version 3, refreshes
	// and is refused: no version 4.
	rec = regBatch(regRow(5))
	_, err = tbl.Upsert(ctx, rec)
	rec.Release()
	check("warm upsert", err)
	if _, err := mem.Get(ctx, "t/"+manifestKey(4)); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("version 4 written over a format-4 table: %v", err)
	}
}

package lance

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance/lancefile"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// FuzzRewriteManifest: any bytes the raw manifest parser accepts re-encode
// (as a compaction's next manifest does, with the fragments unchanged)
// into a manifest DecodeManifest reads back with the next version, the
// same fragments, indices and flags; decodeTxnEffect never panics. Seeded
// with a manifest and a transaction file LanceDB 0.31 wrote (an index
// section, deletion files, an inline transaction).
func FuzzRewriteManifest(f *testing.F) {
	for _, p := range []string{"testdata/manifests/lancedb-0.31-mixed.manifest", "testdata/manifests/lancedb-0.31.txn"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeTxnEffect("fuzz", b)
		rm, err := parseRawManifest("fuzz", b)
		if err != nil || rm.m.Version == 1<<64-1 {
			return
		}
		var frags [][]byte
		for _, fr := range rm.fragments {
			frags = append(frags, fr.raw)
		}
		out := rm.encode(nextManifest{Version: rm.m.Version + 1, Timestamp: time.Unix(1, 2), Fragments: frags, MaxFragmentID: rm.maxFragmentID() & 0xffffffff, TransactionFile: "1-x.txn"})
		m, err := DecodeManifest("re-encoded", out)
		if err != nil {
			t.Fatalf("re-encoded manifest refused: %v", err)
		}
		if m.Version != rm.m.Version+1 || len(m.Fragments) != len(rm.m.Fragments) || len(m.Indices) != len(rm.m.Indices) ||
			m.ReaderFlags != rm.m.ReaderFlags || m.WriterFlags != rm.m.WriterFlags || m.TransactionFile != "1-x.txn" {
			t.Fatalf("re-encoded: %+v, from %+v", m, rm.m)
		}
	})
}

// TestRewriteManifestKeepsFields: the next manifest of a LanceDB manifest
// keeps every field but those a compaction changes, byte for byte.
func TestRewriteManifestKeepsFields(t *testing.T) {
	b, err := os.ReadFile("testdata/manifests/lancedb-0.31-mixed.manifest")
	if err != nil {
		t.Fatal(err)
	}
	rm, err := parseRawManifest("m", b)
	if err != nil {
		t.Fatal(err)
	}
	if rm.indexSection == nil || rm.txn == nil {
		t.Fatalf("the seed should have an index section and an inline transaction")
	}
	var frags [][]byte
	for _, fr := range rm.fragments {
		frags = append(frags, fr.raw)
	}
	out := rm.encode(nextManifest{Version: rm.m.Version + 1, Timestamp: time.Unix(1700000000, 5), Fragments: frags, MaxFragmentID: rm.maxFragmentID(), TransactionFile: "9-abc.txn"})
	again, err := parseRawManifest("again", out)
	if err != nil {
		t.Fatal(err)
	}
	changed := map[int]bool{2: true, 3: true, 6: true, 7: true, 11: true, 12: true, 21: true}
	var want, got []rawField
	for _, f := range rm.fields {
		if !changed[int(f.num)] {
			want = append(want, f)
		}
	}
	for _, f := range again.fields {
		if !changed[int(f.num)] {
			got = append(got, f)
		}
	}
	if len(want) != len(got) {
		t.Fatalf("%d unchanged fields, %d after", len(want), len(got))
	}
	for i := range want {
		if want[i].num != got[i].num || string(want[i].v) != string(got[i].v) || want[i].u != got[i].u {
			t.Fatalf("field %d changed", want[i].num)
		}
	}
	if string(again.indexSection) != string(rm.indexSection) || again.txn != nil || again.m.Version != rm.m.Version+1 || !again.m.Timestamp.Equal(time.Unix(1700000000, 5)) {
		t.Fatalf("index section, inline transaction, version or timestamp: %+v", again.m)
	}
}

// TestCompactRefusesUnreadableFile: a spliced file that fails validation
// (here a validator that says so, standing for any reader rule a splice
// might break) refuses its group with the typed error, and nothing is
// uploaded or committed: the data files, the versions and every row
// LanceDB reads stay as they were.
func TestCompactRefusesUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	lancetest.Node(t, nil, nil, "pages", dir, "t", "fixture", "5", "1")
	store := testkit.DiskStoreAt(t, dir)
	ctx := context.Background()
	ds := Open(store, "t.lance")
	objects := func() []string {
		var keys []string
		p, err := store.List(ctx, objstore.ListOptions{Prefix: "t.lance/"})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Objects {
			keys = append(keys, o.Key)
		}
		return keys
	}
	before, rows := objects(), lancetest.Dump(t, dir, "t")
	broken := &lancefile.RuleError{Name: "spliced", Reason: "a rule broken", Err: lancefile.ErrUnreadable}
	var checked int
	rep, err := ds.Compact(ctx, CompactOptions{validate: func(name string, data []byte, want lancefile.Expect) error {
		checked++
		if want.Rows != 5 || lancefile.Validate(name, data, want) != nil {
			t.Errorf("the spliced file (%d rows expected) does not validate", want.Rows)
		}
		return broken
	}})
	if err != nil {
		t.Fatal(err)
	}
	if checked != 1 || rep.Refused != 1 || rep.Committed != 0 || rep.Version != 0 || !errors.Is(rep.Groups[0].Refusal, lancefile.ErrUnreadable) {
		t.Fatalf("checked %d, report %+v", checked, rep)
	}
	if after := objects(); !slices.Equal(after, before) {
		t.Fatalf("objects after the refusal %v, before %v", after, before)
	}
	lancetest.CheckRetained(t, rows, lancetest.Dump(t, dir, "t"), func(uint64) bool { return true })
}

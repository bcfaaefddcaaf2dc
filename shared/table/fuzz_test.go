package table

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/dataset"
)

// Fuzz targets for the three binary decoders. `make fuzz` (part of `make
// test`) runs each briefly; seeds live in testdata/fuzz/<FuzzName>/ and are
// regenerated with TABLEKEEP_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds.
//
// Every object is sealed with a CRC-32C, so random bytes almost never get
// past the checksum. Each target therefore decodes the input as given and
// also resealed (input minus its last 4 bytes, plus a correct checksum), so
// the fuzzer explores the parser behind the checksum too.
//
// Properties: no panic; an error wraps the package's sentinels; an accepted
// object re-encodes to bytes that decode to the same value and re-encode to
// the same bytes.

func reseal(b []byte) []byte {
	if len(b) < 4 {
		return seal(slices.Clone(b))
	}
	return seal(slices.Clone(b[:len(b)-4]))
}

func checkSentinel(t *testing.T, what string, err error, sentinels ...error) {
	t.Helper()
	var oe *ObjectError
	if !errors.As(err, &oe) || oe.Key == "" {
		t.Fatalf("%s: error %v is not an *ObjectError naming the key", what, err)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("%s: error %v wraps none of %v", what, err, sentinels)
}

func fuzzManifests() []*Manifest {
	ts := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	return []*Manifest{
		{Version: 1, CommitTime: ts, Schema: regSchema, KeyColumn: "name", NextFragmentID: 1,
			Op: Operation{Kind: dataset.OpCreate, TxnID: 42}, Fragments: []Fragment{}},
		{Version: 7, Parent: 6, CommitTime: ts, Schema: regSchema, KeyColumn: "name", NextFragmentID: 9,
			Op: Operation{Kind: dataset.OpUpsert, TxnID: 1<<63 + 5, RowsAdded: 3, RowsDeleted: 1},
			Fragments: []Fragment{
				{ID: 3, File: 0xdeadbeef01234567, Rows: 10, Bytes: 999, CreatedVersion: 2, MinKey: []byte("a"), MaxKey: []byte("k")},
				{ID: 8, File: 1, Rows: 5, Bytes: 100, CreatedVersion: 7,
					Deletion: &Deletion{ID: 0xffffffff, Rows: 2, CreatedVersion: 7}, MinKey: []byte{}, MaxKey: []byte{0, 255}},
			}},
		{Version: 1 << 40, Parent: 1<<40 - 1, CommitTime: time.Unix(0, -1).UTC(),
			Schema: arrow.NewSchema([]arrow.Field{
				{Name: "i", Type: arrow.PrimitiveTypes.Int64}, {Name: "j", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
				{Name: "f", Type: arrow.PrimitiveTypes.Float64}, {Name: "b", Type: arrow.FixedWidthTypes.Boolean},
				{Name: "x", Type: arrow.BinaryTypes.Binary, Nullable: true},
			}, nil),
			Op: Operation{Kind: dataset.OpRestore, RestoredFrom: 3}, Fragments: []Fragment{}},
		// Format 3: inline rows, inline deletions, a record index.
		{Version: 12, Parent: 11, CommitTime: ts, Schema: regSchema, KeyColumn: "name", NextFragmentID: 4,
			Op: Operation{Kind: dataset.OpUpsert, TxnID: 9, RowsAdded: 1, RowsDeleted: 1}, WriterGrace: DefaultGrace,
			Format: 3, InlineMaxBytes: 2048, RecordsFrom: 1, Records: []uint64{2, 9},
			Fragments: []Fragment{{ID: 3, File: 7, Rows: 10, Bytes: 999, CreatedVersion: 9, MinKey: []byte("a"), MaxKey: []byte("k"), Inline: []uint32{0, 4}}},
			Inline: []InlineRow{
				{Version: 11, Seq: 0, Data: []byte{3, 1, 1, 'b', 1, 1, 'u', 1, 2}, Key: []byte("b")},
				{Version: 12, Seq: 0, Data: []byte{3, 1, 1, 'c', 1, 0, 1, 3}, Key: []byte("c")},
			}},
	}
}

func fuzzChanges() []*dataset.ChangeRecord {
	ts := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return []*dataset.ChangeRecord{
		{Version: 1, CommitTime: ts, Op: dataset.OpCreate},
		{Version: 9, CommitTime: ts, Op: dataset.OpRewrite,
			Added:   []string{FileID(5).DataKey(), DeletionKey(5, 2)},
			Removed: []dataset.RemovedFile{{Key: FileID(1).DataKey(), Since: 2}, {Key: DeletionKey(1, 7), Since: 8}}},
		{Version: 3, CommitTime: ts, Op: dataset.OpDelete, Removed: []dataset.RemovedFile{{Key: "../other/data/0000000000000001.parquet", Since: 1}}},
	}
}

var fuzzDeletions = [][]uint32{{}, {0}, {0, 1, 2, 3}, {7, 1000, 1 << 20, 1<<32 - 1}}

// invalid seeds shared by all three targets
func fuzzJunk(magic string) [][]byte {
	trunc := encodeManifest(fuzzManifests()[1])
	return [][]byte{
		nil,
		[]byte(magic),
		append([]byte(magic), 9, 0, 0, 0, 0), // future format version
		trunc[:len(trunc)/2],
		reseal(append([]byte(magic), 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0)),
	}
}

// equalManifest compares two manifests, schemas by value.
func equalManifest(a, b *Manifest) error {
	if !a.Schema.Equal(b.Schema) {
		return fmt.Errorf("schema %v != %v", a.Schema, b.Schema)
	}
	ac, bc := *a, *b
	ac.Schema, bc.Schema = nil, nil
	if !reflect.DeepEqual(ac, bc) {
		return fmt.Errorf("%+v != %+v", ac, bc)
	}
	return nil
}

func FuzzManifestDecode(f *testing.F) {
	for _, m := range fuzzManifests() {
		f.Add(encodeManifest(m))
	}
	for _, b := range fuzzJunk(manifestMagic) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, reseal(data)} {
			m, err := decodeManifest("k", in)
			if err != nil {
				checkSentinel(t, "decodeManifest", err, ErrCorruptManifest, ErrUnsupportedFormat)
				continue
			}
			enc := encodeManifest(m)
			m2, err := decodeManifest("k", enc)
			if err != nil {
				t.Fatalf("re-encoded manifest does not decode: %v", err)
			}
			if err := equalManifest(m, m2); err != nil {
				t.Fatalf("decode(encode(m)) != m: %v", err)
			}
			if !bytes.Equal(encodeManifest(m2), enc) {
				t.Fatalf("re-encoding is not stable")
			}
		}
	})
}

func FuzzChangeDecode(f *testing.F) {
	for _, c := range fuzzChanges() {
		f.Add(encodeChange(c))
	}
	for _, b := range fuzzJunk(changeMagic) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, reseal(data)} {
			c, err := DecodeChange("k", in)
			if err != nil {
				checkSentinel(t, "DecodeChange", err, ErrCorruptObject, ErrUnsupportedFormat)
				continue
			}
			enc := encodeChange(c)
			c2, err := DecodeChange("k", enc)
			if err != nil {
				t.Fatalf("re-encoded change record does not decode: %v", err)
			}
			if !reflect.DeepEqual(c, c2) {
				t.Fatalf("decode(encode(c)) != c: %+v != %+v", c, c2)
			}
			if !bytes.Equal(encodeChange(c2), enc) {
				t.Fatalf("re-encoding is not stable")
			}
		}
	})
}

// FuzzDeletionDecode decodes the input (as given and resealed), and also
// reads it as a list of positions to check decode(encode(x)) == x.
func FuzzDeletionDecode(f *testing.F) {
	for _, p := range fuzzDeletions {
		f.Add(encodeDeletion(p))
	}
	for _, b := range fuzzJunk(deletionMagic) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, reseal(data)} {
			pos, err := decodeDeletion("k", in)
			if err != nil {
				checkSentinel(t, "decodeDeletion", err, ErrCorruptObject)
				continue
			}
			for i := 1; i < len(pos); i++ {
				if pos[i] <= pos[i-1] {
					t.Fatalf("accepted positions not strictly increasing at %d: %v", i, pos[max(0, i-3):i+1])
				}
			}
			enc := encodeDeletion(pos)
			pos2, err := decodeDeletion("k", enc)
			if err != nil || !slices.Equal(pos, pos2) {
				t.Fatalf("decode(encode(p)) = %v, %v; want %v", pos2, err, pos)
			}
			if !bytes.Equal(encodeDeletion(pos2), enc) {
				t.Fatalf("re-encoding is not stable")
			}
		}
		// Valid input: the input's 4-byte words as positions, sorted and distinct.
		var want []uint32
		for i := 0; i+4 <= len(data); i += 4 {
			want = append(want, binary.LittleEndian.Uint32(data[i:]))
		}
		slices.Sort(want)
		want = slices.Compact(want)
		got, err := decodeDeletion("k", encodeDeletion(want))
		if err != nil || len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
			t.Fatalf("decode(encode(%v)) = %v, %v", want, got, err)
		}
	})
}

// TestWriteFuzzSeeds (re)writes the checked-in seed corpora.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("TABLEKEEP_WRITE_FUZZ_SEEDS") == "" {
		t.Log("set TABLEKEEP_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz seeds")
		return
	}
	write := func(target string, seeds map[string][]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	junk := func(magic string, seeds map[string][]byte) map[string][]byte {
		for i, b := range fuzzJunk(magic) {
			seeds[fmt.Sprintf("invalid-%d", i)] = b
		}
		return seeds
	}
	m := map[string][]byte{}
	for i, x := range fuzzManifests() {
		m[fmt.Sprintf("valid-%d", i)] = encodeManifest(x)
	}
	write("FuzzManifestDecode", junk(manifestMagic, m))
	c := map[string][]byte{}
	for i, x := range fuzzChanges() {
		c[fmt.Sprintf("valid-%d", i)] = encodeChange(x)
	}
	write("FuzzChangeDecode", junk(changeMagic, c))
	d := map[string][]byte{}
	for i, x := range fuzzDeletions {
		d[fmt.Sprintf("valid-%d", i)] = encodeDeletion(x)
	}
	// A vector whose second delta wraps uint64 back below the first
	// position: accepted (unsorted) before the overflow check was fixed.
	wrap := append([]byte(deletionMagic), 2, 5)
	wrap = binary.AppendUvarint(wrap, 1<<64-3)
	d["invalid-wrapping-delta"] = seal(wrap)
	write("FuzzDeletionDecode", junk(deletionMagic, d))
}

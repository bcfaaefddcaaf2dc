package table

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/dataset"
)

// format1Example is the worked example of docs/format.md 4.6 as format 1
// wrote it (no writer grace, 32-bit deletion ids).
const format1Example = "544b4d310102018080d0dfbd94b9863102046e616d650100016e0201046e616d65020208070605040302010200000101ddccbbaa33221100028407020001610162a6133ba6"

// format2Example is the same manifest as this build writes it (format 2,
// writer grace 1 h), byte for byte as in docs/format.md 4.6.
const format2Example = "544b4d310202018080d0dfbd94b9863102046e616d650100016e0201046e616d650202080706050403020102000080c0e285e3680101ddccbbaa33221100028407020001610162"

func exampleManifest() *Manifest {
	return &Manifest{
		Version: 2, Parent: 1, CommitTime: time.Unix(0, 1767225600000000000).UTC(),
		Schema: arrow.NewSchema([]arrow.Field{
			{Name: "name", Type: arrow.BinaryTypes.String},
			{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		}, nil),
		KeyColumn: "name", NextFragmentID: 2,
		Op:          Operation{Kind: dataset.OpAppend, TxnID: 0x0102030405060708, RowsAdded: 2},
		WriterGrace: time.Hour,
		Fragments: []Fragment{{ID: 1, File: 0x00112233aabbccdd, Rows: 2, Bytes: 900, CreatedVersion: 2,
			MinKey: []byte("a"), MaxKey: []byte("b")}},
	}
}

// TestFormatExamples: a format-1 manifest still decodes (writer grace
// DefaultGrace), and this build writes the documented format-2 bytes.
func TestFormatExamples(t *testing.T) {
	b1, _ := hex.DecodeString(format1Example)
	m, err := decodeManifest("x", b1)
	if err != nil {
		t.Fatal(err)
	}
	if m.WriterGrace != DefaultGrace || m.Version != 2 || len(m.Fragments) != 1 || m.Fragments[0].File != 0x00112233aabbccdd {
		t.Fatalf("format 1 decoded as %+v", m)
	}
	want := exampleManifest()
	if err := equalManifest(m, want); err != nil {
		t.Fatal(err)
	}
	b2 := encodeManifest(want)
	body, _ := hex.DecodeString(format2Example)
	if got := hex.EncodeToString(b2[:len(b2)-4]); got != hex.EncodeToString(body) {
		t.Fatalf("format 2 example:\n got %s\nwant %s", got, hex.EncodeToString(body))
	}
	t.Logf("format 2 example: %d bytes, CRC %x", len(b2), b2[len(b2)-4:])
}

package table

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// regSchema is the seed's registry shape: name (key), uri, created_at.
var regSchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "uri", Type: arrow.BinaryTypes.String},
	{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

type row struct {
	Name string
	URI  string
	At   int64
}

func regBatch(rows ...row) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, regSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.Name)
		b.Field(1).(*array.StringBuilder).Append(r.URI)
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(r.At))
	}
	return b.NewRecordBatch()
}

// rowsOf reads every live row of a snapshot into a map by name.
func rowsOf(t testing.TB, s *Snapshot) map[string]row {
	t.Helper()
	out := map[string]row{}
	err := s.Scan(context.Background(), ScanOptions{}, func(rec arrow.RecordBatch) error {
		names := rec.Column(0).(*array.String)
		uris := rec.Column(1).(*array.String)
		ats := rec.Column(2).(*array.Timestamp)
		for i := range int(rec.NumRows()) {
			if _, dup := out[names.Value(i)]; dup {
				return fmt.Errorf("duplicate key %q", names.Value(i))
			}
			out[names.Value(i)] = row{names.Value(i), uris.Value(i), int64(ats.Value(i))}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan v%d: %v", s.Version(), err)
	}
	return out
}

func sameRows(a, b map[string]row) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d rows, want %d", len(a), len(b))
	}
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if a[k] != b[k] {
			return fmt.Errorf("row %q = %+v, want %+v", k, a[k], b[k])
		}
	}
	return nil
}

func cloneRows(m map[string]row) map[string]row {
	out := make(map[string]row, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// fakeClock is a settable clock shared by handles in a test.
type fakeClock = fakeclock.Clock

// storeKinds runs a test on local disk and on S3 (versitygw).
func storeKinds(t *testing.T, fn func(t *testing.T, newStore func(t *testing.T) objstore.Store)) {
	t.Run("disk", func(t *testing.T) {
		fn(t, func(t *testing.T) objstore.Store {
			s, err := objstore.NewDisk(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("s3", func(t *testing.T) {
		fn(t, func(t *testing.T) objstore.Store { return s3Store(t) })
	})
}

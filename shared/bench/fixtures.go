package bench

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Schema is the seed's registry shape: name (key), uri, created_at.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "uri", Type: arrow.BinaryTypes.String},
	{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

// rows builds a batch of n registry rows named prefix-i.
func rows(prefix string, first, n int, at time.Time) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema)
	defer b.Release()
	for i := first; i < first+n; i++ {
		name := fmt.Sprintf("%s-%06d", prefix, i)
		b.Field(0).(*array.StringBuilder).Append(name)
		b.Field(1).(*array.StringBuilder).Append("s3://rollouts/" + name + ".lance")
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMicro()))
	}
	return b.NewRecordBatch()
}

// fakeClock is simulated time: the churn advances it one minute per write
// (the seed's write rate); lock waits advance it instead of sleeping.
type fakeClock = fakeclock.Clock

func newFakeClock(t time.Time) *fakeClock { return fakeclock.New(t) }

// Reqs is a request count over N operations.
type Reqs struct {
	C objstore.Counts
	N int
}

// Per is the count per operation of one kind.
func (r Reqs) Per(kind string) float64 {
	var v int64
	switch kind {
	case "GET":
		v = r.C.Get
	case "HEAD":
		v = r.C.Head
	case "PUT":
		v = r.C.Put
	case "LIST":
		v = r.C.List
	case "DELETE":
		v = r.C.DeleteRequests
	case "KEYS":
		v = r.C.DeleteKeys
	}
	return float64(v) / float64(max(r.N, 1))
}

// timed runs fn n times and returns the requests and the mean time per run.
func timed(n int, cnt *objstore.Counting, fn func(i int) error) (Reqs, time.Duration, error) {
	base := cnt.Counts()
	start := time.Now()
	for i := range n {
		if err := fn(i); err != nil {
			return Reqs{}, 0, err
		}
	}
	el := time.Since(start)
	return Reqs{C: cnt.Counts().Sub(base), N: n}, el / time.Duration(n), nil
}

type arrowRecord = arrow.RecordBatch

func firstString(rec arrow.RecordBatch) string {
	return rec.Column(0).(*array.String).Value(0)
}

package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

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
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// clockStore stamps the objects it writes with the simulated clock, and
// reports that time as LastModified: the grace window (versions and files
// younger than it are kept) then runs on simulated time, as it would on S3
// with real minutes between writes.
type clockStore struct {
	objstore.Store
	clock *fakeClock
	mu    sync.Mutex
	at    map[string]time.Time
}

func newClockStore(inner objstore.Store, clock *fakeClock) *clockStore {
	return &clockStore{Store: inner, clock: clock, at: map[string]time.Time{}}
}

func (s *clockStore) stamp(key string) {
	s.mu.Lock()
	s.at[key] = s.clock.Now()
	s.mu.Unlock()
}

func (s *clockStore) fix(o objstore.ObjectInfo) objstore.ObjectInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.at[o.Key]; ok {
		o.LastModified = t
	}
	return o
}

func (s *clockStore) Put(ctx context.Context, key string, data []byte) error {
	err := s.Store.Put(ctx, key, data)
	if err == nil {
		s.stamp(key)
	}
	return err
}

func (s *clockStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.Store.PutIfAbsent(ctx, key, data)
	if err == nil {
		s.stamp(key)
	}
	return err
}

func (s *clockStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	o, err := s.Store.Head(ctx, key)
	return s.fix(o), err
}

func (s *clockStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	p, err := s.Store.List(ctx, opts)
	for i := range p.Objects {
		p.Objects[i] = s.fix(p.Objects[i])
	}
	return p, err
}

func (s *clockStore) Delete(ctx context.Context, keys []string) error {
	err := s.Store.Delete(ctx, keys)
	s.mu.Lock()
	for _, k := range keys {
		delete(s.at, k)
	}
	s.mu.Unlock()
	return err
}

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

package fakeclock

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Clock is a clock.Clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ clock.Clock = (*Clock)(nil)

// New returns a clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Sleep advances the clock by d at once instead of waiting, and yields so
// that other goroutines (a lock holder, say) make progress meanwhile.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	runtime.Gosched()
	return nil
}

// NoSleep is c (the real clock if c is nil) with a Sleep that returns at
// once, ctx.Err(), without moving time: for tests and benchmarks whose
// commit retries must neither wait nor advance simulated time.
func NoSleep(c clock.Clock) clock.Clock { return noSleep{clock.Or(c)} }

type noSleep struct{ c clock.Clock }

func (n noSleep) Now() time.Time { return n.c.Now() }

func (noSleep) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// Store reports, for objects written through it, the clock's time (taken
// when the write started) as LastModified, so that grace windows measured
// against object ages run on the same timeline as the writers: a directory
// store's mtimes are real time.
type Store struct {
	objstore.Store
	clock *Clock
	mu    sync.Mutex
	at    map[string]time.Time
}

// NewStore wraps inner.
func NewStore(inner objstore.Store, clock *Clock) *Store {
	return &Store{Store: inner, clock: clock, at: map[string]time.Time{}}
}

// NewStoreStamped wraps inner, a copy of the objects another Store
// stamped, with those stamps (Stamps): the copy's objects keep the times
// their writers saw.
func NewStoreStamped(inner objstore.Store, clock *Clock, stamps map[string]time.Time) *Store {
	s := NewStore(inner, clock)
	for k, t := range stamps {
		s.at[k] = t
	}
	return s
}

// Stamps returns a copy of the times of the objects written through s.
func (s *Store) Stamps() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(s.at))
	for k, t := range s.at {
		out[k] = t
	}
	return out
}

func (s *Store) stamp(key string, t time.Time) {
	s.mu.Lock()
	s.at[key] = t
	s.mu.Unlock()
}

func (s *Store) fix(o objstore.ObjectInfo) objstore.ObjectInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.at[o.Key]; ok {
		o.LastModified = t
	}
	return o
}

// Put writes and stamps the key.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	now := s.clock.Now()
	err := s.Store.Put(ctx, key, data)
	if err == nil {
		s.stamp(key, now)
	}
	return err
}

// PutIfAbsent writes and stamps the key.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	now := s.clock.Now()
	err := s.Store.PutIfAbsent(ctx, key, data)
	if err == nil {
		s.stamp(key, now)
	}
	return err
}

// Head reports the stamped time.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	o, err := s.Store.Head(ctx, key)
	if err != nil {
		return o, err
	}
	return s.fix(o), nil
}

// List reports the stamped times.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	p, err := s.Store.List(ctx, opts)
	for i := range p.Objects {
		p.Objects[i] = s.fix(p.Objects[i])
	}
	return p, err
}

// Delete deletes and forgets the stamps.
func (s *Store) Delete(ctx context.Context, keys []string) error {
	err := s.Store.Delete(ctx, keys)
	s.mu.Lock()
	for _, k := range keys {
		delete(s.at, k)
	}
	s.mu.Unlock()
	return err
}

package objstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// Profile is the latency of one request of each kind: what a store adds in
// front of every request to look like a remote object store. Delete is per
// request (a DeleteObjects of up to MaxDeleteKeys keys), not per key.
type Profile struct {
	Name                         string // "none", "s3", "s3-express", or "custom"
	Get, Head, Put, List, Delete time.Duration
}

// Named profiles. S3 is S3 Standard as measured from the same region;
// S3Express is S3 Express One Zone (single-digit milliseconds).
const (
	ProfileNone      = "none"
	ProfileS3        = "s3"
	ProfileS3Express = "s3-express"
	ProfileCustom    = "custom"
)

// S3Profile is GET 20 ms, HEAD 20, PUT 30, LIST 40, DeleteObjects 120.
func S3Profile() Profile {
	return Profile{Name: ProfileS3, Get: 20 * time.Millisecond, Head: 20 * time.Millisecond,
		Put: 30 * time.Millisecond, List: 40 * time.Millisecond, Delete: 120 * time.Millisecond}
}

// S3ExpressProfile is GET 4 ms, HEAD 4, PUT 6, LIST 8, DeleteObjects 10.
func S3ExpressProfile() Profile {
	return Profile{Name: ProfileS3Express, Get: 4 * time.Millisecond, Head: 4 * time.Millisecond,
		Put: 6 * time.Millisecond, List: 8 * time.Millisecond, Delete: 10 * time.Millisecond}
}

// ProfileNames are the named profiles ParseProfile accepts.
func ProfileNames() []string { return []string{ProfileNone, ProfileS3, ProfileS3Express} }

// ParseProfile reads a profile for a flag: a name ("none" or "", "s3",
// "s3-express"), a single duration applied to every kind ("10ms"), or
// per-kind durations "get=20ms,head=20ms,put=30ms,list=40ms,delete=120ms"
// (kinds left out are 0, except head, which defaults to get).
func ParseProfile(s string) (Profile, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "", ProfileNone, "0":
		return Profile{Name: ProfileNone}, nil
	case ProfileS3:
		return S3Profile(), nil
	case ProfileS3Express, "s3express", "express":
		return S3ExpressProfile(), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return Profile{}, fmt.Errorf("latency profile %q: negative duration", s)
		}
		return Profile{Name: ProfileCustom, Get: d, Head: d, Put: d, List: d, Delete: d}, nil
	}
	if !strings.Contains(s, "=") {
		return Profile{}, fmt.Errorf("unknown latency profile %q (want %s, a duration, or get=20ms,put=30ms,list=40ms,delete=120ms)",
			s, strings.Join(ProfileNames(), ", "))
	}
	p := Profile{Name: ProfileCustom}
	headSet := false
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Profile{}, fmt.Errorf("latency profile %q: %q is not kind=duration", s, part)
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return Profile{}, fmt.Errorf("latency profile %q: bad duration %q for %s", s, v, k)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "get":
			p.Get = d
		case "head":
			p.Head, headSet = d, true
		case "put":
			p.Put = d
		case "list":
			p.List = d
		case "delete", "deleteobjects":
			p.Delete = d
		default:
			return Profile{}, fmt.Errorf("latency profile %q: unknown request kind %q (want get, head, put, list, delete)", s, k)
		}
	}
	if !headSet {
		p.Head = p.Get
	}
	return p, nil
}

// For is the latency of one request of kind k.
func (p Profile) For(k Kind) time.Duration {
	switch k {
	case KindGet:
		return p.Get
	case KindHead:
		return p.Head
	case KindPut:
		return p.Put
	case KindList:
		return p.List
	case KindDelete:
		return p.Delete
	}
	return 0
}

// IsZero reports whether the profile adds no latency.
func (p Profile) IsZero() bool {
	return p.Get == 0 && p.Head == 0 && p.Put == 0 && p.List == 0 && p.Delete == 0
}

// Of is the latency the requests in c add when made one after another.
func (p Profile) Of(c Counts) time.Duration {
	return time.Duration(c.Get)*p.Get + time.Duration(c.Head)*p.Head + time.Duration(c.Put)*p.Put +
		time.Duration(c.List)*p.List + time.Duration(c.DeleteRequests)*p.Delete
}

// String is the name and the per-kind latencies, for reports.
func (p Profile) String() string {
	if p.IsZero() {
		return ProfileNone
	}
	ms := func(d time.Duration) string {
		return strings.TrimSuffix(fmt.Sprintf("%g", float64(d)/1e6), ".0") + " ms"
	}
	name := p.Name
	if name == "" {
		name = ProfileCustom
	}
	return fmt.Sprintf("%s (GET %s, HEAD %s, PUT %s, LIST %s, DeleteObjects %s per request)",
		name, ms(p.Get), ms(p.Head), ms(p.Put), ms(p.List), ms(p.Delete))
}

// Latency wraps a Store and delays every request by its profile's latency
// for the request's kind before sending it, so that code running against a
// local store pays a remote store's round trips. Concurrent requests wait
// concurrently, as they would on the network. Calls rejected before sending
// (invalid key, too many keys, empty delete, cancelled context) are not
// delayed; a context that ends during the wait ends the request unsent.
// Safe for concurrent use.
type Latency struct {
	inner Store
	p     Profile
	clock clock.Clock
}

var _ Store = (*Latency)(nil)

// NewLatency wraps inner with profile p. Each wait is clk.Sleep (nil: the
// real clock); tests pass a fake clock. fakeclock.Clock.Sleep advances its
// clock by each wait, so there concurrent waits add up; real timers inside a
// testing/synctest bubble overlap as on the network (and take no real time).
func NewLatency(inner Store, p Profile, clk clock.Clock) *Latency {
	return &Latency{inner: inner, p: p, clock: clock.Or(clk)}
}

// WithLatency is NewLatency with real time, or inner itself when p adds no
// latency.
func WithLatency(inner Store, p Profile) Store {
	if p.IsZero() {
		return inner
	}
	return NewLatency(inner, p, nil)
}

// Inner is the wrapped store.
func (l *Latency) Inner() Store { return l.inner }

// Profile is the wrapper's profile.
func (l *Latency) Profile() Profile { return l.p }

// Rates are S3's (S3Rates) when the profile adds latency: a store made to
// look like a remote object store is paced like one (Paced). With the zero
// profile they are the inner store's.
func (l *Latency) Rates() Rates {
	if l.p.IsZero() {
		return RatesOf(l.inner)
	}
	return S3Rates()
}

func (l *Latency) wait(ctx context.Context, op Op) error {
	if err := precheck(ctx, op); err != nil {
		return err
	}
	if d := l.p.For(op.Kind); d > 0 {
		return l.clock.Sleep(ctx, d)
	}
	return nil
}

func (l *Latency) Get(ctx context.Context, key string) ([]byte, error) {
	if err := l.wait(ctx, Op{Kind: KindGet, Key: key}); err != nil {
		return nil, err
	}
	return l.inner.Get(ctx, key)
}

func (l *Latency) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := l.wait(ctx, Op{Kind: KindHead, Key: key}); err != nil {
		return ObjectInfo{}, err
	}
	return l.inner.Head(ctx, key)
}

func (l *Latency) Put(ctx context.Context, key string, data []byte) error {
	if err := l.wait(ctx, Op{Kind: KindPut, Key: key}); err != nil {
		return err
	}
	return l.inner.Put(ctx, key, data)
}

func (l *Latency) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := l.wait(ctx, Op{Kind: KindPut, Key: key, Conditional: true}); err != nil {
		return err
	}
	return l.inner.PutIfAbsent(ctx, key, data)
}

func (l *Latency) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	if err := l.wait(ctx, Op{Kind: KindList, Key: opts.Prefix}); err != nil {
		return ListPage{}, err
	}
	return l.inner.List(ctx, opts)
}

func (l *Latency) Delete(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return l.inner.Delete(ctx, keys)
	}
	if err := l.wait(ctx, Op{Kind: KindDelete, Keys: keys}); err != nil {
		return err
	}
	return l.inner.Delete(ctx, keys)
}

// Path is the longest chain of dependent requests a PathTracker saw.
type Path struct {
	// Kinds are the requests of the chain, in order; len(Kinds) is the
	// number of round trips on the critical path.
	Kinds []Kind
	// Latency is the chain's latency under the tracker's profile.
	Latency time.Duration
}

// RoundTrips is the chain's length.
func (p Path) RoundTrips() int { return len(p.Kinds) }

func (p Path) String() string {
	parts := make([]string, len(p.Kinds))
	for i, k := range p.Kinds {
		parts[i] = string(k)
	}
	return fmt.Sprintf("%d round trips (%s), %s", len(p.Kinds), strings.Join(parts, " -> "), p.Latency)
}

func (p Path) longer(o Path) bool {
	if p.Latency != o.Latency {
		return p.Latency > o.Latency
	}
	return len(p.Kinds) > len(o.Kinds)
}

// PathTracker wraps a Store and measures the critical path of the requests
// made through it: a request is taken to depend on every request that
// completed before it started, so its chain is the longest chain completed
// so far plus itself. That is exact for one caller's work (a call that
// waits for a result before its next request, or fans out and joins) as
// long as concurrent requests overlap, which they do behind a Latency
// wrapper (put the tracker outside it) or in a testing/synctest bubble.
// Safe for concurrent use.
type PathTracker struct {
	inner Store
	p     Profile
	mu    sync.Mutex
	done  Path // longest chain completed so far
}

var _ Store = (*PathTracker)(nil)

// NewPathTracker wraps inner; p weighs the requests (the zero Profile
// counts round trips only).
func NewPathTracker(inner Store, p Profile) *PathTracker { return &PathTracker{inner: inner, p: p} }

// Inner is the wrapped store.
func (t *PathTracker) Inner() Store { return t.inner }

// Path is the longest chain so far.
func (t *PathTracker) Path() Path {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Path{Kinds: slices.Clone(t.done.Kinds), Latency: t.done.Latency}
}

// Reset forgets every chain: the next request starts a new one.
func (t *PathTracker) Reset() {
	t.mu.Lock()
	t.done = Path{}
	t.mu.Unlock()
}

// track runs one request; the chain is extended when it completes.
func (t *PathTracker) track(ctx context.Context, op Op, send func() error) error {
	if err := precheck(ctx, op); err != nil {
		return err
	}
	t.mu.Lock()
	mine := Path{Kinds: append(slices.Clone(t.done.Kinds), op.Kind), Latency: t.done.Latency + t.p.For(op.Kind)}
	t.mu.Unlock()
	err := send()
	t.mu.Lock()
	if mine.longer(t.done) {
		t.done = mine
	}
	t.mu.Unlock()
	return err
}

func (t *PathTracker) Get(ctx context.Context, key string) (b []byte, err error) {
	err = t.track(ctx, Op{Kind: KindGet, Key: key}, func() error { b, err = t.inner.Get(ctx, key); return err })
	return b, err
}

func (t *PathTracker) Head(ctx context.Context, key string) (oi ObjectInfo, err error) {
	err = t.track(ctx, Op{Kind: KindHead, Key: key}, func() error { oi, err = t.inner.Head(ctx, key); return err })
	return oi, err
}

func (t *PathTracker) Put(ctx context.Context, key string, data []byte) error {
	return t.track(ctx, Op{Kind: KindPut, Key: key}, func() error { return t.inner.Put(ctx, key, data) })
}

func (t *PathTracker) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return t.track(ctx, Op{Kind: KindPut, Key: key, Conditional: true}, func() error { return t.inner.PutIfAbsent(ctx, key, data) })
}

func (t *PathTracker) List(ctx context.Context, opts ListOptions) (p ListPage, err error) {
	err = t.track(ctx, Op{Kind: KindList, Key: opts.Prefix}, func() error { p, err = t.inner.List(ctx, opts); return err })
	return p, err
}

func (t *PathTracker) Delete(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return t.inner.Delete(ctx, keys)
	}
	return t.track(ctx, Op{Kind: KindDelete, Keys: keys}, func() error { return t.inner.Delete(ctx, keys) })
}

package objstore

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/time/rate"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// ThrottleOptions configure WithWriteThrottle.
type ThrottleOptions struct {
	// WritesPerSecond is the write rate one partition takes, counting each
	// key of a DeleteObjects request as one write (default 3,500: S3's
	// documented PUT/COPY/POST/DELETE rate per partitioned prefix).
	WritesPerSecond float64
	// Partition maps a key to its partition (nil: one partition for the
	// whole store, a new prefix as S3 starts it).
	Partition func(key string) string
	// Clock defaults to real time.
	Clock clock.Clock
}

// Throttled counts what a write throttle refused.
type Throttled struct {
	Requests int64 // DeleteObjects requests answered SlowDown
	Keys     int64 // keys in them (none of them deleted)
}

// WriteThrottle is a store answering SlowDown, as S3 does, to a
// DeleteObjects request whose keys would take its partition above
// WritesPerSecond (a token bucket holding one second of writes): nothing of
// a refused request is deleted, and the caller retries. Benchmarks use it to
// show that cleaners sharing one table's prefix settle under S3's rate
// instead of assuming it. Other requests pass through.
type WriteThrottle struct {
	Store
	o         ThrottleOptions
	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	throttled Throttled
}

// WithWriteThrottle wraps s.
func WithWriteThrottle(s Store, o ThrottleOptions) *WriteThrottle {
	if o.WritesPerSecond <= 0 {
		o.WritesPerSecond = 3500
	}
	o.Clock = clock.Or(o.Clock)
	return &WriteThrottle{Store: s, o: o, buckets: map[string]*rate.Limiter{}}
}

// Rates are the inner store's, with WritesPerSecond as the delete rate:
// the throttle stands for S3's write limit (Paced), so callers pace their
// deletes to it.
func (w *WriteThrottle) Rates() Rates {
	r := RatesOf(w.Store)
	r.DeleteKeys = w.o.WritesPerSecond
	return r
}

// Throttled reports the requests refused so far.
func (w *WriteThrottle) Throttled() Throttled {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.throttled
}

// Delete deletes keys unless their partition's write budget is spent.
func (w *WriteThrottle) Delete(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return w.Store.Delete(ctx, keys)
	}
	part := ""
	if w.o.Partition != nil {
		part = w.o.Partition(keys[0])
	}
	w.mu.Lock()
	b, ok := w.buckets[part]
	if !ok {
		burst := max(int(w.o.WritesPerSecond), MaxDeleteKeys)
		b = rate.NewLimiter(rate.Limit(w.o.WritesPerSecond), burst)
		w.buckets[part] = b
	}
	allowed := b.AllowN(w.o.Clock.Now(), len(keys))
	if !allowed {
		w.throttled.Requests++
		w.throttled.Keys += int64(len(keys))
	}
	w.mu.Unlock()
	if !allowed {
		return fmt.Errorf("delete %d keys under %q: %w", len(keys), part, ErrSlowDown)
	}
	return w.Store.Delete(ctx, keys)
}

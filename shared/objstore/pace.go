package objstore

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/errgroup"
)

// S3's documented request rates per partitioned prefix: 3,500
// PUT/COPY/POST/DELETE and 5,500 GET/HEAD requests per second. A
// DeleteObjects request of n keys counts as n DELETEs against the first
// (each key is a write to the index), so deletes are paced in keys per
// second, not DeleteObjects requests.
const (
	S3DeleteKeysPerSecond = 3500
	S3GetsPerSecond       = 5500
)

// Rates are the request rates a store takes per prefix, the rates its
// callers pace themselves to; 0 is no limit (nothing paced).
type Rates struct {
	DeleteKeys float64 // keys deleted per second (each key of a DeleteObjects one write)
	Gets       float64 // GET and HEAD requests per second
}

// S3Rates are S3's per-prefix rates.
func S3Rates() Rates { return Rates{DeleteKeys: S3DeleteKeysPerSecond, Gets: S3GetsPerSecond} }

// Paced is a Store that says the rates it takes: S3, and the wrappers that
// stand for S3 (Latency with a profile, WriteThrottle). A store that is
// not Paced (Disk) takes whatever it is sent: pacing is a property of the
// store, not of the code calling it.
type Paced interface {
	Rates() Rates
}

// unwrapper is a wrapper that shows its inner store (Counting, Faulty,
// PathTracker, Overlay).
type unwrapper interface {
	Inner() Store
}

// RatesOf is the rates of s: its own if it is Paced, else its inner
// store's through wrappers, else none (the zero Rates).
func RatesOf(s Store) Rates {
	for s != nil {
		switch w := s.(type) {
		case Paced:
			return w.Rates()
		case unwrapper:
			s = w.Inner()
		default:
			return Rates{}
		}
	}
	return Rates{}
}

// NewGetLimiter returns the AIMD limiter of GETs sent to s at rate per
// second (0: s's own rate, RatesOf), burst at a time; nil, no pacing, if
// that rate is 0.
func NewGetLimiter(s Store, rate float64, burst int) *AIMDLimiter {
	if rate <= 0 {
		rate = RatesOf(s).Gets
	}
	if rate <= 0 {
		return nil
	}
	return NewAIMDLimiter(AIMDOptions{Cap: rate, Burst: burst})
}

// NewDeleteLimiter returns the AIMD limiter of keys deleted from s at rate
// per second (0: s's own rate, RatesOf), a whole DeleteObjects request at
// a time; nil, no pacing, if that rate is 0.
func NewDeleteLimiter(s Store, rate float64) *AIMDLimiter {
	if rate <= 0 {
		rate = RatesOf(s).DeleteKeys
	}
	if rate <= 0 {
		return nil
	}
	return NewAIMDLimiter(AIMDOptions{Cap: rate, Burst: MaxDeleteKeys})
}

// DeleterOptions configure NewDeleter. Zero values take the defaults.
type DeleterOptions struct {
	Batch    int          // keys per DeleteObjects request (1..MaxDeleteKeys; default MaxDeleteKeys)
	InFlight int          // requests in flight (default 1)
	Limit    *AIMDLimiter // paces the keys deleted per second (nil: not paced)
	Retries  int          // how often a SlowDown answer (whole, or per key) is retried, the rate lowered each time
}

// Deleter sends DeleteObjects requests of up to Batch keys as batches
// fill, up to InFlight at a time, paced by a keys-per-second limiter; a
// SlowDown answer lowers the limiter's rate and is retried. Add and Flush
// are not safe for concurrent use; Wait once.
type Deleter struct {
	ctx     context.Context
	store   Store
	batch   int
	limit   *AIMDLimiter
	retries int
	g       *errgroup.Group
	pending []string

	mu       sync.Mutex
	deleted  int
	requests int
	failed   []KeyError
}

// NewDeleter returns a Deleter of keys of s; ctx is every request's.
func NewDeleter(ctx context.Context, s Store, o DeleterOptions) *Deleter {
	if o.Batch <= 0 || o.Batch > MaxDeleteKeys {
		o.Batch = MaxDeleteKeys
	}
	g := new(errgroup.Group)
	g.SetLimit(max(1, o.InFlight))
	return &Deleter{ctx: ctx, store: s, batch: o.Batch, limit: o.Limit, retries: o.Retries, g: g}
}

// Add queues keys; a full batch is sent (Add blocks while InFlight
// requests are outstanding).
func (d *Deleter) Add(keys ...string) {
	for _, k := range keys {
		d.pending = append(d.pending, k)
		if len(d.pending) >= d.batch {
			d.Flush()
		}
	}
}

// Flush sends the pending keys, a batch however small.
func (d *Deleter) Flush() {
	if len(d.pending) == 0 {
		return
	}
	keys := d.pending
	d.pending = nil
	if d.ctx.Err() != nil {
		return // Wait reports ctx's error
	}
	d.g.Go(func() error { return d.send(keys) })
}

// Wait sends what is pending, waits for every request and returns the
// number of keys deleted and of requests sent; per-key failures come back
// as one *DeleteError, as DeleteAll reports them.
func (d *Deleter) Wait() (deleted, requests int, err error) {
	d.Flush()
	err = d.g.Wait()
	if err == nil {
		err = d.ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && len(d.failed) > 0 {
		err = &DeleteError{Failed: d.failed}
	}
	return d.deleted, d.requests, err
}

func (d *Deleter) send(keys []string) error {
	for attempt := 0; ; attempt++ {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		if d.limit != nil {
			if err := d.limit.Wait(d.ctx, len(keys)); err != nil {
				return err
			}
		}
		err := d.store.Delete(d.ctx, keys)
		d.mu.Lock()
		d.requests++
		d.mu.Unlock()
		var de *DeleteError
		switch {
		case err == nil:
			d.count(len(keys), nil)
			if d.limit != nil {
				d.limit.Success()
			}
			return nil
		case errors.Is(err, ErrSlowDown):
			if d.limit != nil {
				d.limit.SlowDown()
			}
			if attempt < d.retries {
				continue
			}
			return err
		case errors.As(err, &de):
			var slow []string
			var other []KeyError
			for _, f := range de.Failed {
				if f.Code == "SlowDown" && attempt < d.retries {
					slow = append(slow, f.Key)
				} else {
					other = append(other, f)
				}
			}
			d.count(len(keys)-len(de.Failed), other)
			if len(slow) == 0 {
				if d.limit != nil {
					d.limit.Success()
				}
				return nil
			}
			if d.limit != nil {
				d.limit.SlowDown()
			}
			keys = slow
		default:
			return err
		}
	}
}

func (d *Deleter) count(deleted int, failed []KeyError) {
	d.mu.Lock()
	d.deleted += deleted
	d.failed = append(d.failed, failed...)
	d.mu.Unlock()
}

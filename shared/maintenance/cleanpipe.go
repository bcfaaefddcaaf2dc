package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Cleaner concurrency and rate defaults (CleanerLimits).
const (
	DefaultCleanerReads   = 64 // change-record GETs in flight (64 x 50 GET/s at 20 ms = 3,200 GET/s, under S3's 5,500 per prefix)
	DefaultCleanerDeletes = 4  // DeleteObjects requests in flight
	// DefaultSlowDownRetries is how often one request is retried after a
	// SlowDown answer (on top of the SDK's own retries), the rate halved
	// each time.
	DefaultSlowDownRetries = 3
)

// CleanerLimits bound a cleaner's concurrency and request rates. Zero
// values take the defaults. Memory is bounded too: at most Reads change
// records are read and not yet consumed, and at most Deletes x DeleteBatch
// keys are in flight (the invocation's keys are bounded by MaxKeysPerRun).
type CleanerLimits struct {
	Reads   int // change-record GETs in flight (DefaultCleanerReads)
	Deletes int // DeleteObjects requests in flight (DefaultCleanerDeletes)
	// GetRate caps change-record GETs per second (S3GetsPerSecond);
	// DeleteRate caps keys deleted per second (S3DeleteKeysPerSecond).
	// Both are per cleaner; SlowDown answers lower them (AIMDLimiter).
	GetRate, DeleteRate float64
	Retries             int // SlowDown retries per request (DefaultSlowDownRetries)
}

func (l CleanerLimits) withDefaults() CleanerLimits {
	if l.Reads <= 0 {
		l.Reads = DefaultCleanerReads
	}
	if l.Deletes <= 0 {
		l.Deletes = DefaultCleanerDeletes
	}
	if l.GetRate <= 0 {
		l.GetRate = S3GetsPerSecond
	}
	if l.DeleteRate <= 0 {
		l.DeleteRate = S3DeleteKeysPerSecond
	}
	if l.Retries <= 0 {
		l.Retries = DefaultSlowDownRetries
	}
	return l
}

// scanOpts configure scanRange.
type scanOpts struct {
	maxKeys int         // stop once this many data keys are collected (0: no bound)
	reads   int         // GETs in flight
	stop    func() bool // stop early (the invocation's time is up)
	onKey   func(key string)
	limit   *AIMDLimiter // paces GETs (nil: none)
	retries int
}

// scanRange reads the change records of msg's range, up to o.reads at a
// time, and consumes them in version order, so the plan (and the
// continuation's cursor: every record at or below it was consumed) is the
// one a serial read gives. A record is launched only while fewer than
// o.reads are launched and not consumed, and only if the consumer has not
// stopped, which it decides after each record: with reads = 1 the requests
// are exactly the serial ones; with more, a stop (key budget, time) leaves
// at most reads-1 records read ahead, which are not consumed (the
// continuation reads them again): the plan is exactly the serial one.
//
// ready is called once before the first record is consumed and returns the
// tagged versions; records are read (GETs only) while it runs, so a caller
// that opens the table and checks its floor in ready overlaps those round
// trips with the first reads. If ready fails, nothing is consumed and its
// error is returned (at most o.reads records were read for nothing).
func scanRange(ctx context.Context, st objstore.Store, ref TableRef, msg RangeMessage, o scanOpts, ready func(context.Context) (map[uint64]bool, error)) (RangePlan, error) {
	rp := RangePlan{Range: msg}
	root := table.NormalizeRoot(ref.Root)
	var tagged map[uint64]bool
	taggedIn := func(lo, hi uint64) bool {
		for v := range tagged {
			if v >= lo && v <= hi {
				return true
			}
		}
		return false
	}
	reads := max(1, o.reads)
	first := max(msg.From+1, msg.Cursor+1)
	end := msg.To + 1

	type got struct {
		cr  *table.ChangeRecord
		err error
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stopped atomic.Bool
	tokens := make(chan struct{}, reads) // launched and not consumed
	slots := make(chan chan got, reads)  // results, in version order
	go func() {
		defer close(slots)
		g := new(errgroup.Group)
		g.SetLimit(reads)
		defer func() { _ = g.Wait() }()
		for r := first; r <= end; r++ {
			select {
			case tokens <- struct{}{}:
			case <-gctx.Done():
				return
			}
			if stopped.Load() || gctx.Err() != nil {
				return
			}
			ch := make(chan got, 1)
			slots <- ch // never blocks: tokens bound the slots
			g.Go(func() error {
				cr, err := readChange(gctx, st, root, r, o.limit, o.retries)
				ch <- got{cr, err}
				return nil
			})
		}
	}()

	last := first - 1
	var scanErr error
	if tagged, scanErr = ready(gctx); scanErr != nil {
		stopped.Store(true)
		cancel()
	}
	for ch := range slots {
		res := <-ch
		if scanErr != nil || stopped.Load() {
			// Draining what was launched before the error or the stop: a
			// record read ahead past the stop is left to the continuation
			// (at most reads-1 GETs repeated), so the key budget holds as
			// in a serial read.
			continue
		}
		r := last + 1
		switch {
		case errors.Is(res.err, objstore.ErrNotExist):
			// Processed and deleted by an earlier delivery, or never written
			// and not repairable now: the orphan sweep covers what remains.
			rp.Missing++
		case res.err != nil:
			scanErr = res.err
		default:
			rp.ChangeRecords++
			for _, rf := range res.cr.Removed {
				if err := checkDataKey(ref, rf.Key); err != nil {
					scanErr = fmt.Errorf("%w: change record %d: %w", queue.ErrPermanent, r, err)
					break
				}
				if taggedIn(rf.Since, r-1) {
					rp.KeptForTags++
					continue
				}
				rp.DataKeys = append(rp.DataKeys, ref.Root+rf.Key)
				if o.onKey != nil {
					o.onKey(ref.Root + rf.Key)
				}
			}
		}
		if scanErr != nil {
			stopped.Store(true)
			cancel()
			continue
		}
		last = r
		if (o.maxKeys > 0 && len(rp.DataKeys) >= o.maxKeys) || (o.stop != nil && o.stop()) {
			stopped.Store(true)
		}
		<-tokens
	}
	if scanErr != nil {
		return rp, scanErr
	}
	if err := ctx.Err(); err != nil && last < end {
		return rp, err
	}
	if last < end {
		cont := msg
		cont.Cursor = last
		rp.Continuation = &cont
		return rp, nil
	}
	// The change records deleted are the ones this range read, [From+1,
	// To+1] (and version 1's, which has nothing to remove): deleting
	// [From, To] removed record From, which the range below still needs,
	// so a reordered delivery left that range's files behind. Records go
	// before the manifests: a crash between the delete batches leaves
	// manifests, which the planner sees and re-plans, never records alone.
	if msg.From == 1 {
		rp.MetaKeys = append(rp.MetaKeys, ref.Root+table.ChangeKey(1))
	}
	for v := msg.From + 1; v <= msg.To+1; v++ {
		rp.MetaKeys = append(rp.MetaKeys, ref.Root+table.ChangeKey(v))
	}
	for v := msg.From; v <= msg.To; v++ {
		if tagged[v] {
			continue
		}
		rp.MetaKeys = append(rp.MetaKeys, ref.Root+table.ManifestKey(v))
		rp.VersionsDeleted++
	}
	return rp, nil
}

// readChange reads change record r of the table at root, paced by lim,
// retrying a SlowDown answer up to retries times with the rate lowered.
func readChange(ctx context.Context, st objstore.Store, root string, r uint64, lim *AIMDLimiter, retries int) (*table.ChangeRecord, error) {
	for attempt := 0; ; attempt++ {
		if lim != nil {
			if err := lim.Wait(ctx, 1); err != nil {
				return nil, err
			}
		}
		cr, err := table.ReadChangeRecord(ctx, st, root, r)
		if lim != nil {
			switch {
			case err == nil || errors.Is(err, objstore.ErrNotExist):
				lim.Success()
			case errors.Is(err, objstore.ErrSlowDown):
				lim.SlowDown()
				if attempt < retries {
					continue
				}
			}
		}
		return cr, err
	}
}

// deleter sends DeleteObjects requests of up to batch keys as batches
// fill, up to inflight at a time, paced by a keys-per-second limiter.
// Not safe for concurrent add; wait once.
type deleter struct {
	ctx     context.Context
	store   objstore.Store
	batch   int
	limit   *AIMDLimiter
	retries int
	g       *errgroup.Group
	pending []string

	mu       sync.Mutex
	deleted  int
	requests int
	failed   []objstore.KeyError
}

func newDeleter(ctx context.Context, store objstore.Store, batch, inflight int, limit *AIMDLimiter, retries int) *deleter {
	if batch <= 0 || batch > objstore.MaxDeleteKeys {
		batch = objstore.MaxDeleteKeys
	}
	g := new(errgroup.Group)
	g.SetLimit(max(1, inflight))
	return &deleter{ctx: ctx, store: store, batch: batch, limit: limit, retries: retries, g: g}
}

// add queues key; a full batch is sent (add blocks while inflight
// requests are outstanding).
func (d *deleter) add(keys ...string) {
	for _, k := range keys {
		d.pending = append(d.pending, k)
		if len(d.pending) >= d.batch {
			d.flush()
		}
	}
}

func (d *deleter) flush() {
	if len(d.pending) == 0 {
		return
	}
	keys := d.pending
	d.pending = nil
	if d.ctx.Err() != nil {
		return // wait reports ctx's error
	}
	d.g.Go(func() error { return d.send(keys) })
}

// wait sends what is pending, waits for every request and returns the
// number of keys deleted and of requests sent; per-key failures come back
// as one *objstore.DeleteError, as objstore.DeleteAll reports them.
func (d *deleter) wait() (deleted, requests int, err error) {
	d.flush()
	err = d.g.Wait()
	if err == nil {
		err = d.ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && len(d.failed) > 0 {
		err = &objstore.DeleteError{Failed: d.failed}
	}
	return d.deleted, d.requests, err
}

func (d *deleter) send(keys []string) error {
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
		var de *objstore.DeleteError
		switch {
		case err == nil:
			d.count(len(keys), nil)
			if d.limit != nil {
				d.limit.Success()
			}
			return nil
		case errors.Is(err, objstore.ErrSlowDown):
			if d.limit != nil {
				d.limit.SlowDown()
			}
			if attempt < d.retries {
				continue
			}
			return err
		case errors.As(err, &de):
			var slow []string
			var other []objstore.KeyError
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

func (d *deleter) count(deleted int, failed []objstore.KeyError) {
	d.mu.Lock()
	d.deleted += deleted
	d.failed = append(d.failed, failed...)
	d.mu.Unlock()
}

// sizer lists, at most once per prefix and concurrently with the scan,
// the first pages of the data prefixes the plan's keys use, so that the
// bytes of the keys deleted are known before they are deleted (the same
// List requests Sizes makes, overlapped with the GETs).
type sizer struct {
	ctx      context.Context
	st       objstore.Store
	root     string
	maxPages int
	mu       sync.Mutex
	lists    map[string]*sizeList
	wg       sync.WaitGroup
}

type sizeList struct {
	sizes map[string]int64
}

func newSizer(ctx context.Context, st objstore.Store, root string, maxPages int) *sizer {
	return &sizer{ctx: ctx, st: st, root: root, maxPages: maxPages, lists: map[string]*sizeList{}}
}

// see starts the listing of key's data prefix if it is not started yet.
func (s *sizer) see(key string) {
	rel := strings.TrimPrefix(key, s.root)
	for _, p := range []string{table.DataPrefix, table.DeletionsPrefix} {
		if !strings.HasPrefix(rel, p) {
			continue
		}
		s.mu.Lock()
		if _, ok := s.lists[p]; ok {
			s.mu.Unlock()
			return
		}
		l := &sizeList{sizes: map[string]int64{}}
		s.lists[p] = l
		s.mu.Unlock()
		s.wg.Go(func() {
			seen := 0
			_ = objstore.ListAll(s.ctx, s.st, s.root+p, "", func(o objstore.ObjectInfo) error {
				l.sizes[o.Key] = o.Size
				if seen++; s.maxPages > 0 && seen >= s.maxPages*objstore.MaxListKeys {
					return errStopList
				}
				return nil
			})
		})
	}
}

// dataBytes waits for the listings and returns the bytes of keys found
// and how many were found.
func (s *sizer) dataBytes(keys []string) (int64, int) {
	s.wg.Wait()
	var n int64
	found := 0
	for _, k := range keys {
		for _, l := range s.lists {
			if sz, ok := l.sizes[k]; ok {
				n += sz
				found++
				break
			}
		}
	}
	return n, found
}

package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
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
	// GetRate caps change-record GETs per second; DeleteRate caps keys
	// deleted per second. 0: the store's rates (objstore.RatesOf: S3's
	// 5,500 and 3,500 for an S3 store, none for a local disk, which is not
	// paced). Both are per cleaner; SlowDown answers lower them
	// (objstore.AIMDLimiter).
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
	if l.Retries <= 0 {
		l.Retries = DefaultSlowDownRetries
	}
	return l
}

// rangeReader is what scanRange reads a range through: the change
// records, the check of every key a record names, the keys a removed file
// stands for, and the keys of a version's record and manifest. Keys it
// returns are full keys: sourceReader reads any Source.
type rangeReader interface {
	// record reads version v's change record (an error wrapping
	// objstore.ErrNotExist if there is none). One request.
	record(ctx context.Context, v uint64) (*dataset.ChangeRecord, error)
	// check accepts only keys (relative to the root) that a change record
	// of the format may name: a forged record deletes nothing.
	check(rel string) error
	// keys are the full keys of a removed file that passed check (a
	// directory key stands for everything under it).
	keys(ctx context.Context, rel string) ([]string, error)
	// recordKey is version v's change record; manifestKeys are v's
	// manifest (full keys).
	recordKey(v uint64) string
	manifestKeys(ctx context.Context, v uint64) ([]string, error)
}

// sourceReader reads a Source's range: its records through ChangeRecord,
// keys checked by CheckKey (and checkSourceKey's rules), directory keys
// (a Lance index) expanded by listing them.
type sourceReader struct{ src Source }

func (r sourceReader) record(ctx context.Context, v uint64) (*dataset.ChangeRecord, error) {
	return r.src.ChangeRecord(ctx, v)
}
func (r sourceReader) check(rel string) error { return checkSourceKey(r.src, rel) }
func (r sourceReader) keys(ctx context.Context, rel string) ([]string, error) {
	return expandKey(ctx, r.src, rel)
}
func (r sourceReader) recordKey(v uint64) string { return r.src.Root() + r.src.RecordKey(v) }
func (r sourceReader) manifestKeys(ctx context.Context, v uint64) ([]string, error) {
	keys, err := r.src.ManifestKeys(ctx, v)
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = r.src.Root() + k
	}
	return full, err
}

// expandKey returns the full keys a change-record key stands for: itself,
// or everything under it for a directory key.
func expandKey(ctx context.Context, src Source, rel string) ([]string, error) {
	if !strings.HasSuffix(rel, "/") {
		return []string{src.Root() + rel}, nil
	}
	var out []string
	err := objstore.ListAll(ctx, src.Store(), src.Root()+rel, "", func(o objstore.ObjectInfo) error {
		out = append(out, o.Key)
		return nil
	})
	return out, err
}

// scanOpts configure scanRange.
type scanOpts struct {
	maxKeys int         // stop once this many data keys are collected (0: no bound)
	reads   int         // GETs in flight
	stop    func() bool // stop early (the invocation's time is up)
	onKey   func(key string)
	limit   *objstore.AIMDLimiter // paces GETs (nil: none)
	retries int
}

// scanRange reads the change records of msg's range through rd, up to
// o.reads at a time, and consumes them in version order, so the plan (and
// the continuation's cursor: every record at or below it was consumed) is
// the one a serial read gives. A record is launched only while fewer than
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
func scanRange(ctx context.Context, rd rangeReader, msg RangeMessage, o scanOpts, ready func(context.Context) (map[uint64]bool, error)) (RangePlan, error) {
	rp := RangePlan{Range: msg}
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
		cr   *dataset.ChangeRecord
		err  error
		none bool // the version has no change record (msg.Records)
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
			if msg.Records != nil {
				if _, has := slices.BinarySearch(*msg.Records, r); !has {
					ch <- got{none: true} // no change record (format 3): nothing read
					continue
				}
			}
			g.Go(func() error {
				cr, err := readChange(gctx, rd, r, o.limit, o.retries)
				ch <- got{cr: cr, err: err}
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
		case res.none:
		case errors.Is(res.err, objstore.ErrNotExist):
			// Processed and deleted by an earlier delivery, or never written
			// and not repairable now: the orphan sweep covers what remains.
			rp.Missing++
		case res.err != nil:
			scanErr = res.err
		default:
			rp.ChangeRecords++
			scanErr = rp.consume(ctx, rd, r, res.cr, taggedIn, o.onKey)
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
	rp.tagged, rp.consumed = tagged, last
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
	if msg.From == 1 && msg.Records == nil { // format 3 (Records set): version 1 has none
		rp.MetaKeys = append(rp.MetaKeys, rd.recordKey(1))
	}
	for v := msg.From + 1; v <= msg.To+1; v++ {
		if msg.Records != nil {
			if _, has := slices.BinarySearch(*msg.Records, v); !has {
				continue // format 3: no record was written (a missed one is the sweep's)
			}
		}
		rp.MetaKeys = append(rp.MetaKeys, rd.recordKey(v))
	}
	rp.recordKeys = len(rp.MetaKeys)
	for v := msg.From; v <= msg.To; v++ {
		if tagged[v] {
			continue
		}
		keys, err := rd.manifestKeys(ctx, v)
		if err != nil {
			return rp, err
		}
		rp.MetaKeys = append(rp.MetaKeys, keys...)
		rp.VersionsDeleted++
	}
	return rp, nil
}

// consume adds the files change record r removes to the plan: each is
// checked (a forged key fails the whole range, permanently), kept if a
// tagged version referenced it, else its keys are planned for deletion.
func (rp *RangePlan) consume(ctx context.Context, rd rangeReader, r uint64, cr *dataset.ChangeRecord, taggedIn func(lo, hi uint64) bool, onKey func(string)) error {
	for _, rf := range cr.Removed {
		if err := rd.check(rf.Key); err != nil {
			return fmt.Errorf("%w: change record %d: %w", queue.ErrPermanent, r, err)
		}
		if taggedIn(rf.Since, r-1) {
			rp.KeptForTags++
			continue
		}
		keys, err := rd.keys(ctx, rf.Key)
		if err != nil {
			return fmt.Errorf("change record %d: %w", r, err)
		}
		rp.DataKeys = append(rp.DataKeys, keys...)
		if len(keys) > 0 && (rp.firstSince == 0 || rf.Since < rp.firstSince) {
			rp.firstSince = rf.Since
		}
		if onKey != nil {
			for _, k := range keys {
				onKey(k)
			}
		}
	}
	return nil
}

// readChange reads change record r through rd, paced by lim, retrying a
// SlowDown answer up to retries times with the rate lowered.
func readChange(ctx context.Context, rd rangeReader, r uint64, lim *objstore.AIMDLimiter, retries int) (*dataset.ChangeRecord, error) {
	return paced(ctx, lim, retries, func() (*dataset.ChangeRecord, error) { return rd.record(ctx, r) })
}

// deleteSwept deletes an orphan sweep's keys through the cleaner's paced
// deleter: batches of batch keys, one request at a time (in order, as the
// keys were planned), paced at the store's delete rate (objstore.RatesOf:
// S3's 3,500 keys/s on S3, none on a local disk), a SlowDown answer
// (whole, or per key) retried DefaultSlowDownRetries times with the rate
// lowered. Per-key failures come back as one *objstore.DeleteError.
func deleteSwept(ctx context.Context, st objstore.Store, keys []string, batch int) (deleted, requests int, err error) {
	d := objstore.NewDeleter(ctx, st, objstore.DeleterOptions{
		Batch: batch, InFlight: 1, Limit: objstore.NewDeleteLimiter(st, 0), Retries: DefaultSlowDownRetries,
	})
	d.Add(keys...)
	return d.Wait()
}

// sizer lists, at most once per prefix and concurrently with the scan,
// the first pages of the data prefixes the plan's keys use, so that the
// bytes of the keys deleted are known before they are deleted (the same
// List requests Sizes makes, overlapped with the GETs).
type sizer struct {
	ctx      context.Context
	st       objstore.Store
	root     string
	prefixes []string // the data prefixes listed (SizeLister)
	maxPages int
	mu       sync.Mutex
	lists    map[string]*sizeList
	wg       sync.WaitGroup
}

type sizeList struct {
	sizes map[string]int64
}

func newSizer(ctx context.Context, st objstore.Store, root string, prefixes []string, maxPages int) *sizer {
	return &sizer{ctx: ctx, st: st, root: root, prefixes: prefixes, maxPages: maxPages, lists: map[string]*sizeList{}}
}

// see starts the listing of key's data prefix if it is not started yet.
func (s *sizer) see(key string) {
	rel := strings.TrimPrefix(key, s.root)
	for _, p := range s.prefixes {
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

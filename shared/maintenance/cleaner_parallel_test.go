package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// manyVersions is a table of n versions of churn (upserts over a few keys,
// some deletes, one tag) after a maintenance run whose prune ranges were
// recorded, not sent: the directory to copy and the range bodies.
func manyVersions(t *testing.T, p maintenance.Policy, n int) (string, [][]byte) {
	return manyVersionsB(t, t, p, n)
}

func manyVersionsB(t testing.TB, _ *testing.T, p maintenance.Policy, n int) (string, [][]byte) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	e := newEnv(t, dir, p, queue.EmbeddedOptions{})
	tb := e.create(t)
	for i := range n - 1 {
		if i%9 == 8 {
			if _, err := tb.Delete(ctx, fmt.Sprint("k", (i*7)%13)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		res := upsert(t, tb, fmt.Sprint("k", (i*7)%13), fmt.Sprint("v", i))
		if i == n/3 {
			if err := tb.Tag(ctx, "keep", res.Version); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec := &bodies{}
	e.runner.Queue = rec
	e.clock.Advance(2 * time.Hour)
	if _, err := e.runner.MaintainTable(ctx, e.ref); err != nil {
		t.Fatal(err)
	}
	bs := rec.take()
	if len(bs) == 0 {
		t.Fatal("no prune ranges")
	}
	return dir, bs
}

// jitterStore delays each request by a random few microseconds, so that
// concurrent requests complete in varying orders.
type jitterStore struct {
	objstore.Store
	mu  sync.Mutex
	rnd *rand.Rand
}

func (s *jitterStore) jitter() {
	s.mu.Lock()
	d := time.Duration(s.rnd.IntN(300)) * time.Microsecond
	s.mu.Unlock()
	time.Sleep(d)
}

func (s *jitterStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.jitter()
	return s.Store.Get(ctx, key)
}

func (s *jitterStore) Delete(ctx context.Context, keys []string) error {
	s.jitter()
	return s.Store.Delete(ctx, keys)
}

// cleanAll runs every body and every continuation through c, serially.
func cleanAll(t *testing.T, c *maintenance.Cleaner, rec *bodies, bs [][]byte) (messages int) {
	t.Helper()
	for len(bs) > 0 {
		for _, b := range bs {
			if _, err := c.Clean(context.Background(), b); err != nil {
				t.Fatalf("clean %s: %v", b, err)
			}
			messages++
		}
		bs = rec.take()
	}
	return messages
}

// TestCleanerParallelMatchesSerial: with 32 reads and 4 delete requests in
// flight, completing in random orders, the cleaner deletes exactly what
// the serial cleaner (1 and 1) deletes, with the same requests by kind.
func TestCleanerParallelMatchesSerial(t *testing.T) {
	p := testPolicy()
	p.RangeVersions = 60
	p.DeleteBatch = 7 // many batches per range
	p.MaxKeysPerRun = 100000
	dir, bs := manyVersions(t, p, 200)
	if len(bs) < 2 {
		t.Fatalf("%d ranges, want several", len(bs))
	}
	run := func(limits maintenance.CleanerLimits, seed uint64) (map[string]int64, objstore.Counts, int) {
		d := filepath.Join(t.TempDir(), "s")
		copyDir(t, dir, d)
		e := newEnv(t, d, p, queue.EmbeddedOptions{})
		e.clock.Advance(2 * time.Hour)
		cnt := objstore.NewCounting(&jitterStore{Store: e.disk, rnd: rand.New(rand.NewPCG(seed, 1))})
		rec := &bodies{}
		c := &maintenance.Cleaner{
			Store: cnt, Tables: e.cat, Requeue: rec, Logger: discard,
			OpenOpts: table.Options{Clock: e.clock}, Limits: limits,
		}
		n := cleanAll(t, c, rec, bs)
		return listing(t, e.disk, ""), cnt.Counts(), n
	}
	serialLeft, serialCounts, serialMsgs := run(maintenance.CleanerLimits{Reads: 1, Deletes: 1}, 1)
	for seed := range uint64(3) {
		left, counts, msgs := run(maintenance.CleanerLimits{Reads: 32, Deletes: 4}, seed+2)
		if err := sameListing(serialLeft, left); err != nil {
			t.Fatalf("seed %d: parallel cleaner left a different store: %v", seed, err)
		}
		if counts != serialCounts || msgs != serialMsgs {
			t.Fatalf("seed %d: parallel requests %+v in %d messages, serial %+v in %d", seed, counts, msgs, serialCounts, serialMsgs)
		}
	}
	if serialCounts.DeleteRequests < 10 {
		t.Fatalf("only %d delete requests: the test does not exercise concurrent batches", serialCounts.DeleteRequests)
	}
	t.Logf("requests per pass: %+v", serialCounts)
}

// slowDownStore answers SlowDown to chosen Delete and Get requests.
type slowDownStore struct {
	objstore.Store
	n      atomic.Int64
	slow   func(n int64) bool // request n (1-based, change-record Get and Delete) answers SlowDown
	perKey bool               // as per-key errors in a DeleteObjects answer
	match  string             // the GETs it may slow contain this ("": tablekeep's change records)
	slowed atomic.Int64
}

// Get answers SlowDown only for change records, the GETs the cleaner paces
// and retries (the SDK's own retryer covers the others on AWS). The
// cleaner reads the table's manifest, floor and tags concurrently with the
// first change records, so counting every GET would make which request
// is slowed depend on scheduling.
func (s *slowDownStore) Get(ctx context.Context, key string) ([]byte, error) {
	match := s.match
	if match == "" {
		match = "/" + table.ChangesPrefix
	}
	if !strings.Contains(key, match) {
		return s.Store.Get(ctx, key)
	}
	if s.slow(s.n.Add(1)) {
		s.slowed.Add(1)
		return nil, fmt.Errorf("get %s: %w", key, objstore.ErrSlowDown)
	}
	return s.Store.Get(ctx, key)
}

func (s *slowDownStore) Delete(ctx context.Context, keys []string) error {
	if s.slow(s.n.Add(1)) {
		s.slowed.Add(1)
		if !s.perKey {
			return fmt.Errorf("delete: %w", objstore.ErrSlowDown)
		}
		// The first half of the keys is deleted, the rest answers SlowDown.
		h := len(keys) / 2
		if err := s.Store.Delete(ctx, keys[:h]); err != nil {
			return err
		}
		de := &objstore.DeleteError{}
		for _, k := range keys[h:] {
			de.Failed = append(de.Failed, objstore.KeyError{Key: k, Code: "SlowDown", Message: "Please reduce your request rate."})
		}
		return de
	}
	return s.Store.Delete(ctx, keys)
}

// TestCleanerRateLimitAIMD: SlowDown halves the limiter's rate (once per
// cooldown), each success raises it by the step, it never leaves [Floor,
// Cap]; and a cleaner whose store answers SlowDown still deletes
// everything, paced on a fake clock to no more than the cap (plus the
// burst) keys per second.
func TestCleanerRateLimitAIMD(t *testing.T) {
	t.Run("limiter", func(t *testing.T) {
		clk := fakeclock.New(time.Unix(1e9, 0))
		l := objstore.NewAIMDLimiter(objstore.AIMDOptions{Cap: 3500, Floor: 100, Step: 50, Burst: 1000, Clock: clk})
		if r := l.Rate(); r != 3500 {
			t.Fatalf("starts at %v, want the cap", r)
		}
		l.Success()
		if r := l.Rate(); r != 3500 {
			t.Fatalf("success above the cap: %v", r)
		}
		l.SlowDown()
		if r := l.Rate(); r != 1750 {
			t.Fatalf("after SlowDown %v, want 1750", r)
		}
		l.SlowDown() // same burst of answers: one signal
		if r := l.Rate(); r != 1750 {
			t.Fatalf("second SlowDown within the cooldown: %v, want 1750", r)
		}
		clk.Advance(time.Second)
		l.SlowDown()
		if r := l.Rate(); r != 875 {
			t.Fatalf("after a second SlowDown %v, want 875", r)
		}
		for i := 1; i <= 10; i++ {
			l.Success()
			if r, want := l.Rate(), 875+50*float64(i); r != want {
				t.Fatalf("after %d successes %v, want %v", i, r, want)
			}
		}
		for range 100 {
			l.Success()
			if r := l.Rate(); r > 3500 {
				t.Fatalf("rate %v above the cap", r)
			}
		}
		if r := l.Rate(); r != 3500 {
			t.Fatalf("recovered to %v, want the cap", r)
		}
		for range 20 {
			clk.Advance(time.Second)
			l.SlowDown()
			if r := l.Rate(); r < 100 {
				t.Fatalf("rate %v below the floor", r)
			}
		}
		// Pacing on the fake clock: 10,000 events at the floor take >= (10,000 - burst) / floor seconds.
		start := clk.Now()
		for range 100 {
			if err := l.Wait(context.Background(), 100); err != nil {
				t.Fatal(err)
			}
		}
		if el, min := clk.Now().Sub(start), time.Duration(float64(10000-1000)/100*float64(time.Second)); el < min {
			t.Fatalf("10,000 events in %s at 100/s, want >= %s", el, min)
		}
	})
	for _, perKey := range []bool{false, true} {
		t.Run(fmt.Sprint("cleaner/perKey=", perKey), func(t *testing.T) {
			p := testPolicy()
			p.RangeVersions = 60
			p.DeleteBatch = 5
			p.MaxKeysPerRun = 100000
			dir, bs := manyVersions(t, p, 120)
			// Reference: a cleaner on a store that never throttles.
			ref := func() map[string]int64 {
				d := filepath.Join(t.TempDir(), "ref")
				copyDir(t, dir, d)
				e := newEnv(t, d, p, queue.EmbeddedOptions{})
				e.clock.Advance(2 * time.Hour)
				rec := &bodies{}
				c := &maintenance.Cleaner{Store: e.disk, Tables: e.cat, Requeue: rec, Logger: discard, OpenOpts: table.Options{Clock: e.clock}}
				cleanAll(t, c, rec, bs)
				return listing(t, e.disk, "")
			}()

			d := filepath.Join(t.TempDir(), "s")
			copyDir(t, dir, d)
			e := newEnv(t, d, p, queue.EmbeddedOptions{})
			e.clock.Advance(2 * time.Hour)
			// Every 7th request answers SlowDown.
			st := &slowDownStore{Store: e.disk, slow: func(n int64) bool { return n%7 == 0 }, perKey: perKey}
			cnt := objstore.NewCounting(st)
			lclk := fakeclock.New(time.Unix(1e9, 0))
			const capKeys, burst = 200, 10
			del := objstore.NewAIMDLimiter(objstore.AIMDOptions{Cap: capKeys, Floor: 10, Step: 20, Burst: burst, Cooldown: time.Nanosecond, Clock: lclk})
			get := objstore.NewAIMDLimiter(objstore.AIMDOptions{Cap: 5500, Burst: 32, Cooldown: time.Nanosecond, Clock: lclk})
			rec := &bodies{}
			c := &maintenance.Cleaner{
				Store: cnt, Tables: e.cat, Requeue: rec, Logger: discard, OpenOpts: table.Options{Clock: e.clock},
				Limits: maintenance.CleanerLimits{Retries: 1000}, GetLimit: get, DeleteLimit: del,
			}
			sawLow := false
			for b := bs; len(b) > 0; b = rec.take() {
				for _, body := range b {
					start := lclk.Now()
					res, err := c.Clean(context.Background(), body)
					if err != nil {
						t.Fatal(err)
					}
					if r := del.Rate(); r > capKeys || r < 10 {
						t.Fatalf("delete rate %v outside [10, %d]", r, capKeys)
					}
					if del.Rate() < capKeys {
						sawLow = true
					}
					keys := res.DataKeys + res.ManifestKeys
					if el := lclk.Now().Sub(start).Seconds(); float64(keys) > capKeys*el+burst*float64(res.DeleteRequests) {
						t.Fatalf("%d keys in %.2fs (fake): above %d keys/s", keys, el, capKeys)
					}
				}
			}
			if st.slowed.Load() == 0 || !sawLow {
				t.Fatalf("SlowDown answers %d, rate lowered %v: the test did not throttle", st.slowed.Load(), sawLow)
			}
			if err := sameListing(ref, listing(t, e.disk, "")); err != nil {
				t.Fatalf("throttled cleaner left a different store: %v", err)
			}
			// Successes raise it again.
			for range 100 {
				del.Success()
			}
			if r := del.Rate(); r != capKeys {
				t.Fatalf("rate %v after successes, want the cap %d", r, capKeys)
			}
		})
	}
}

// TestCleanerFitsDeadline: an invocation whose time (StopBy, on a fake
// clock that each request advances by S3's latency) covers only part of a
// 1,000-version range reads part of it, deletes that part's files, sends
// the rest as a continuation and returns no error; a message that arrives
// after StopBy is sent back unchanged without a request; the continuation
// finishes the job, leaving what an unbounded run leaves.
func TestCleanerFitsDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1,000 versions")
	}
	p := testPolicy()
	p.RangeVersions = 1000
	p.MaxKeysPerRun = 100000
	dir, bs := manyVersions(t, p, 1010)
	var big []byte
	for _, b := range bs {
		m, err := maintenance.DecodeRangeMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.To-m.From+1 >= 900 {
			big = b
		}
	}
	if big == nil {
		t.Fatalf("no range of ~1,000 versions in %s", bs)
	}
	ref := func() map[string]int64 {
		d := filepath.Join(t.TempDir(), "ref")
		copyDir(t, dir, d)
		e := newEnv(t, d, p, queue.EmbeddedOptions{})
		e.clock.Advance(2 * time.Hour)
		rec := &bodies{}
		c := &maintenance.Cleaner{Store: e.disk, Tables: e.cat, Requeue: rec, Logger: discard, OpenOpts: table.Options{Clock: e.clock}}
		cleanAll(t, c, rec, [][]byte{big})
		return listing(t, e.disk, "")
	}()

	d := filepath.Join(t.TempDir(), "s")
	copyDir(t, dir, d)
	e := newEnv(t, d, p, queue.EmbeddedOptions{})
	e.clock.Advance(2 * time.Hour)
	// Each GET advances the invocation's clock by 20 ms: 1,000 change
	// records take 20 s of it; StopBy allows 6 s.
	lat := &latencyClockStore{Store: e.disk, clock: e.clock, get: 20 * time.Millisecond}
	rec := &bodies{}
	c := &maintenance.Cleaner{
		Store: lat, Tables: e.cat, Requeue: rec, Logger: discard, OpenOpts: table.Options{Clock: e.clock},
		StopBy: e.clock.Now().Add(6 * time.Second),
	}
	before := listing(t, e.disk, "")
	res, err := c.Clean(context.Background(), big)
	if err != nil {
		t.Fatalf("partial invocation failed: %v", err)
	}
	if res.Continuation == nil || res.Deferred {
		t.Fatalf("no continuation: %+v", res)
	}
	cont := rec.take()
	if len(cont) != 1 {
		t.Fatalf("%d continuations sent, want 1", len(cont))
	}
	m, _ := maintenance.DecodeRangeMessage(cont[0])
	if m.Cursor <= m.From || m.Cursor >= m.To || res.ChangeRecords < 100 || res.ChangeRecords > 400 {
		t.Fatalf("continuation %+v after %d change records: want a cursor part-way", m, res.ChangeRecords)
	}
	if res.DataKeys == 0 || res.ManifestKeys != 0 {
		t.Fatalf("partial invocation deleted %d data keys, %d manifests: want data only", res.DataKeys, res.ManifestKeys)
	}
	if len(listing(t, e.disk, "")) >= len(before) {
		t.Fatal("partial invocation deleted nothing")
	}
	// Another message of the same invocation, after StopBy: sent back as is.
	res2, err := c.Clean(context.Background(), bs[0])
	if err != nil || !res2.Deferred || res2.Requests != (objstore.Counts{}) {
		t.Fatalf("late message: %+v, %v; want deferred with no request", res2, err)
	}
	if back := rec.take(); len(back) != 1 || string(back[0]) != string(bs[0]) {
		t.Fatalf("late message sent back as %q, want %q", back, bs[0])
	}
	// The next invocation has its own time and finishes the range.
	for b := cont; len(b) > 0; b = rec.take() {
		c.StopBy = e.clock.Now().Add(6 * time.Second)
		for _, body := range b {
			if _, err := c.Clean(context.Background(), body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sameListing(ref, listing(t, e.disk, "")); err != nil {
		t.Fatalf("continuations left a different store than one unbounded run: %v", err)
	}
}

// latencyClockStore advances a fake clock by a latency per GET.
type latencyClockStore struct {
	objstore.Store
	clock *fakeClock
	get   time.Duration
}

func (s *latencyClockStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.clock.Advance(s.get)
	return s.Store.Get(ctx, key)
}

var _ = errors.Is

// s3LatencyStore sleeps S3's round trips (GET 20 ms, PUT 30, LIST 40,
// DeleteObjects 120) before each request: for the benchmark below only
// (objstore's latency wrapper is the general tool; this keeps the cleaner's
// measurement self-contained).
type s3LatencyStore struct{ objstore.Store }

func (s s3LatencyStore) Get(ctx context.Context, key string) ([]byte, error) {
	time.Sleep(20 * time.Millisecond)
	return s.Store.Get(ctx, key)
}
func (s s3LatencyStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	time.Sleep(20 * time.Millisecond)
	return s.Store.Head(ctx, key)
}
func (s s3LatencyStore) Put(ctx context.Context, key string, b []byte) error {
	time.Sleep(30 * time.Millisecond)
	return s.Store.Put(ctx, key, b)
}
func (s s3LatencyStore) PutIfAbsent(ctx context.Context, key string, b []byte) error {
	time.Sleep(30 * time.Millisecond)
	return s.Store.PutIfAbsent(ctx, key, b)
}
func (s s3LatencyStore) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	time.Sleep(40 * time.Millisecond)
	return s.Store.List(ctx, o)
}
func (s s3LatencyStore) Delete(ctx context.Context, keys []string) error {
	time.Sleep(120 * time.Millisecond)
	return s.Store.Delete(ctx, keys)
}

// BenchmarkCleanerRangeS3Latency: one 1,000-version range at S3 latency,
// serial (1 read, 1 delete in flight) and with the defaults: the
// per-message time the template's cleaner sizing is derived from
// (docs/aws.md).
//
//	go test -run '^$' -bench CleanerRangeS3Latency -benchtime 1x ./shared/maintenance/
func BenchmarkCleanerRangeS3Latency(b *testing.B) {
	p := testPolicy()
	p.RangeVersions = 1000
	p.MaxKeysPerRun = 100000
	dir, bs := manyVersionsB(b, nil, p, 1010)
	var big []byte
	for _, body := range bs {
		if m, _ := maintenance.DecodeRangeMessage(body); m.To-m.From+1 >= 900 {
			big = body
		}
	}
	for _, c := range []struct {
		name   string
		limits maintenance.CleanerLimits
	}{{"serial", maintenance.CleanerLimits{Reads: 1, Deletes: 1}}, {"default", maintenance.CleanerLimits{}}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				d := filepath.Join(b.TempDir(), "s")
				copyDir(b, dir, d)
				e := newEnv(b, d, p, queue.EmbeddedOptions{})
				e.clock.Advance(2 * time.Hour)
				rec := &bodies{}
				cl := &maintenance.Cleaner{Store: s3LatencyStore{e.disk}, Tables: e.cat, Requeue: rec, Logger: discard,
					OpenOpts: table.Options{Clock: e.clock}, Limits: c.limits}
				b.StartTimer()
				start := time.Now()
				res, err := cl.Clean(context.Background(), big)
				el := time.Since(start)
				if err != nil || res.Continuation != nil {
					b.Fatalf("%+v %v", res, err)
				}
				keys := res.DataKeys + res.ManifestKeys
				b.ReportMetric(el.Seconds(), "s/message")
				b.ReportMetric(float64(keys)/el.Seconds(), "keys/s")
				b.Logf("%s: %d versions, %d keys in %s, requests %v", c.name, res.To-res.From+1, keys, el.Round(time.Millisecond), res.Requests)
			}
		})
	}
}

package objstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func TestLatencyProfiles(t *testing.T) {
	ms := time.Millisecond
	t.Run("parse", func(t *testing.T) {
		for _, tc := range []struct {
			in   string
			want objstore.Profile
		}{
			{"", objstore.Profile{Name: "none"}},
			{"none", objstore.Profile{Name: "none"}},
			{"s3", objstore.Profile{Name: "s3", Get: 20 * ms, Head: 20 * ms, Put: 30 * ms, List: 40 * ms, Delete: 120 * ms}},
			{"S3-Express", objstore.Profile{Name: "s3-express", Get: 4 * ms, Head: 4 * ms, Put: 6 * ms, List: 8 * ms, Delete: 10 * ms}},
			{"get=20ms,put=30ms,list=40ms,delete=120ms",
				objstore.Profile{Name: "custom", Get: 20 * ms, Head: 20 * ms, Put: 30 * ms, List: 40 * ms, Delete: 120 * ms}},
			{" get=1ms, head=2ms ", objstore.Profile{Name: "custom", Get: ms, Head: 2 * ms}},
			{"5ms", objstore.Profile{Name: "custom", Get: 5 * ms, Head: 5 * ms, Put: 5 * ms, List: 5 * ms, Delete: 5 * ms}},
		} {
			got, err := objstore.ParseProfile(tc.in)
			if err != nil || got != tc.want {
				t.Errorf("ParseProfile(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		}
		for _, bad := range []string{"s4", "get=fast", "post=1ms", "get", "-1ms", "get=-1ms"} {
			if p, err := objstore.ParseProfile(bad); err == nil {
				t.Errorf("ParseProfile(%q) = %+v, want an error", bad, p)
			}
		}
		if s := objstore.S3Profile().String(); s != "s3 (GET 20 ms, HEAD 20 ms, PUT 30 ms, LIST 40 ms, DeleteObjects 120 ms per request)" {
			t.Errorf("String() = %q", s)
		}
		if d := objstore.S3Profile().Of(objstore.Counts{List: 1, Get: 2}); d != 80*ms {
			t.Errorf("Of(1 LIST + 2 GET) = %s, want 80ms", d)
		}
	})

	t.Run("per-kind delay on a fake clock", func(t *testing.T) {
		ctx := context.Background()
		clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		cnt := objstore.NewCounting(newDisk(t))
		p := objstore.S3Profile()
		st := objstore.NewLatency(cnt, p, clock)
		start := time.Now()
		step := func(what string, want time.Duration, fn func() error) {
			t.Helper()
			before := clock.Now()
			if err := fn(); err != nil && !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("%s: %v", what, err)
			}
			if got := clock.Now().Sub(before); got != want {
				t.Errorf("%s took %s on the fake clock, want %s", what, got, want)
			}
		}
		step("PUT", p.Put, func() error { return st.Put(ctx, "a/k", []byte("x")) })
		step("PutIfAbsent", p.Put, func() error { return st.PutIfAbsent(ctx, "a/k", []byte("y")) })
		step("GET", p.Get, func() error { _, err := st.Get(ctx, "a/k"); return err })
		step("HEAD", p.Head, func() error { _, err := st.Head(ctx, "a/k"); return err })
		step("LIST", p.List, func() error { _, err := st.List(ctx, objstore.ListOptions{Prefix: "a/"}); return err })
		step("DELETE", p.Delete, func() error { return st.Delete(ctx, []string{"a/k", "a/j"}) })
		// Rejected before sending: no wait, no request.
		step("invalid key", 0, func() error {
			if _, err := st.Get(ctx, "../x"); !errors.Is(err, objstore.ErrInvalidKey) {
				t.Errorf("Get(../x) = %v, want ErrInvalidKey", err)
			}
			return nil
		})
		step("empty delete", 0, func() error { return st.Delete(ctx, nil) })
		want := objstore.Counts{Get: 1, Head: 1, Put: 2, List: 1, DeleteRequests: 1, DeleteKeys: 2}
		if got := cnt.Counts(); got != want {
			t.Errorf("requests %s, want %s", got, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Logf("note: %s of real time (the fake clock should make this instant)", d)
		}
		// A context that ends during the wait ends the request unsent.
		cctx, cancel := context.WithCancel(ctx)
		st2 := objstore.NewLatency(cnt, p, cancelClock{cancel})
		if err := st2.Put(cctx, "a/z", []byte("x")); !errors.Is(err, context.Canceled) {
			t.Errorf("Put with the context ended while waiting = %v, want context.Canceled", err)
		}
		if got := cnt.Counts().Put; got != 2 {
			t.Errorf("%d PUTs sent, want 2 (the cancelled one is not sent)", got)
		}
		// The none profile wraps nothing.
		if s := objstore.WithLatency(cnt, objstore.Profile{Name: "none"}); s != objstore.Store(cnt) {
			t.Errorf("WithLatency(none) wrapped the store")
		}
	})

	t.Run("concurrent waits overlap; the path tracker sees the critical path", func(t *testing.T) {
		disk := newDisk(t)
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			p := objstore.S3Profile()
			// Real timers inside the bubble run on its fake clock.
			tr := objstore.NewPathTracker(objstore.NewLatency(disk, p, nil), p)
			start := time.Now()
			if err := tr.Put(ctx, "b/1", []byte("1")); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() { tr.Get(ctx, "b/1") })
			}
			wg.Wait()
			if _, err := tr.List(ctx, objstore.ListOptions{Prefix: "b/"}); err != nil {
				t.Fatal(err)
			}
			want := p.Put + p.Get + p.List
			if got := time.Since(start); got != want {
				t.Errorf("took %s, want %s (three concurrent GETs cost one round trip)", got, want)
			}
			path := tr.Path()
			if path.RoundTrips() != 3 || path.Latency != want {
				t.Errorf("path %s, want 3 round trips (PUT -> GET -> LIST), %s", path, want)
			}
			tr.Reset()
			if tr.Path().RoundTrips() != 0 {
				t.Errorf("Reset kept the path")
			}
		})
	})
}

// cancelClock ends the request's context as its wait starts.
type cancelClock struct{ cancel context.CancelFunc }

func (cancelClock) Now() time.Time { return time.Now() }

func (c cancelClock) Sleep(ctx context.Context, _ time.Duration) error {
	c.cancel()
	return ctx.Err()
}

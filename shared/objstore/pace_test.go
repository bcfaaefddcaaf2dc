package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestPaceRatesOfStores: pacing is a property of the store. S3, a store
// behind S3-like latency and a write throttle take S3's per-prefix rates,
// through the counting, fault, path and overlay wrappers; a local disk,
// and a zero latency profile over it, are not paced (no limiter).
func TestPaceRatesOfStores(t *testing.T) {
	disk, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	noSleep := fakeclock.NoSleep(nil)
	lat := objstore.NewLatency(disk, objstore.S3Profile(), noSleep)
	s3 := objstore.S3Rates()
	for _, c := range []struct {
		name string
		st   objstore.Store
		want objstore.Rates
	}{
		{"disk", disk, objstore.Rates{}},
		{"counting(disk)", objstore.NewCounting(disk), objstore.Rates{}},
		{"latency none", objstore.NewLatency(disk, objstore.Profile{}, noSleep), objstore.Rates{}},
		{"WithLatency none", objstore.WithLatency(disk, objstore.Profile{}), objstore.Rates{}},
		{"S3", objstore.NewS3(nil, "b"), s3},
		{"latency s3", lat, s3},
		{"latency s3-express", objstore.NewLatency(disk, objstore.S3ExpressProfile(), noSleep), s3},
		{"counting(faulty(path(latency)))", objstore.NewCounting(objstore.NewFaulty(objstore.NewPathTracker(lat, objstore.Profile{}))), s3},
		{"overlay(counting(latency))", objstore.NewOverlay(objstore.NewCounting(lat)), s3},
		{"throttle(disk)", objstore.WithWriteThrottle(disk, objstore.ThrottleOptions{WritesPerSecond: 100}), objstore.Rates{DeleteKeys: 100}},
		{"latency(throttle(disk))", objstore.NewLatency(objstore.WithWriteThrottle(disk, objstore.ThrottleOptions{}), objstore.S3Profile(), noSleep), s3},
	} {
		if got := objstore.RatesOf(c.st); got != c.want {
			t.Errorf("%s: rates %+v, want %+v", c.name, got, c.want)
		}
		get, del := objstore.NewGetLimiter(c.st, 0, 8), objstore.NewDeleteLimiter(c.st, 0)
		if (get == nil) != (c.want.Gets == 0) || (del == nil) != (c.want.DeleteKeys == 0) {
			t.Errorf("%s: limiters get %v del %v for rates %+v", c.name, get, del, c.want)
		}
		if del != nil && del.Rate() != c.want.DeleteKeys {
			t.Errorf("%s: delete limiter at %v, want %v", c.name, del.Rate(), c.want.DeleteKeys)
		}
	}
	// An explicit rate paces any store.
	if l := objstore.NewDeleteLimiter(disk, 50); l == nil || l.Rate() != 50 {
		t.Fatalf("explicit delete rate on disk: %v", l)
	}
}

// slowStore answers SlowDown to the Delete requests slow picks (1-based),
// whole or, with perKey, for the second half of the keys.
type slowStore struct {
	objstore.Store
	n      int
	slow   func(n int) bool
	perKey bool
}

func (s *slowStore) Delete(ctx context.Context, keys []string) error {
	s.n++
	if !s.slow(s.n) {
		return s.Store.Delete(ctx, keys)
	}
	if !s.perKey {
		return fmt.Errorf("delete: %w", objstore.ErrSlowDown)
	}
	h := len(keys) / 2
	if err := s.Store.Delete(ctx, keys[:h]); err != nil {
		return err
	}
	de := &objstore.DeleteError{}
	for _, k := range keys[h:] {
		de.Failed = append(de.Failed, objstore.KeyError{Key: k, Code: "SlowDown"})
	}
	return de
}

// TestPaceDeleter: the paced deleter sends batches of Batch keys, retries
// SlowDown answers (whole or per key) with the limiter's rate lowered, and
// paces the keys to the limiter's rate on its clock; past Retries the
// SlowDown is the error, and other per-key failures come back as one
// DeleteError.
func TestPaceDeleter(t *testing.T) {
	ctx := context.Background()
	put := func(t *testing.T, st objstore.Store, n int) []string {
		var keys []string
		for i := range n {
			k := fmt.Sprintf("data/%04d", i)
			if err := st.Put(ctx, k, []byte("x")); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
		return keys
	}
	for _, perKey := range []bool{false, true} {
		t.Run(fmt.Sprint("perKey=", perKey), func(t *testing.T) {
			disk, err := objstore.NewDisk(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			keys := put(t, disk, 100)
			st := &slowStore{Store: disk, slow: func(n int) bool { return n%3 == 0 }, perKey: perKey}
			clk := fakeclock.New(time.Unix(1e9, 0))
			lim := objstore.NewAIMDLimiter(objstore.AIMDOptions{Cap: 50, Burst: 10, Cooldown: time.Nanosecond, Clock: clk})
			d := objstore.NewDeleter(ctx, st, objstore.DeleterOptions{Batch: 10, InFlight: 1, Limit: lim, Retries: 100})
			d.Add(keys...)
			n, reqs, err := d.Wait()
			if err != nil || n != 100 {
				t.Fatalf("deleted %d in %d requests: %v", n, reqs, err)
			}
			if reqs != st.n || reqs <= 10 {
				t.Fatalf("%d requests counted, %d sent: want more than 10 (retries)", reqs, st.n)
			}
			if lim.Rate() >= 50 {
				t.Fatalf("rate %v: not lowered by SlowDown", lim.Rate())
			}
			// 100 keys, at most 50/s after a burst of 10: >= 1.8 s on the clock.
			if el := clk.Now().Sub(time.Unix(1e9, 0)); el < 1800*time.Millisecond {
				t.Fatalf("100 keys in %s at <= 50/s", el)
			}
			left, err := disk.List(ctx, objstore.ListOptions{Prefix: "data/"})
			if err != nil || len(left.Objects) != 0 {
				t.Fatalf("left %d: %v", len(left.Objects), err)
			}
		})
	}
	t.Run("retries spent", func(t *testing.T) {
		disk, err := objstore.NewDisk(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		keys := put(t, disk, 5)
		st := &slowStore{Store: disk, slow: func(int) bool { return true }}
		d := objstore.NewDeleter(ctx, st, objstore.DeleterOptions{Retries: 2})
		d.Add(keys...)
		n, reqs, err := d.Wait()
		if !errors.Is(err, objstore.ErrSlowDown) || n != 0 || reqs != 3 {
			t.Fatalf("deleted %d in %d requests, err %v: want ErrSlowDown after 3 requests", n, reqs, err)
		}
	})
	t.Run("per-key failures", func(t *testing.T) {
		disk, err := objstore.NewDisk(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		keys := put(t, disk, 4)
		st := &slowStore{Store: disk, slow: func(int) bool { return true }, perKey: true}
		d := objstore.NewDeleter(ctx, st, objstore.DeleterOptions{Batch: 2})
		d.Add(keys...)
		n, reqs, err := d.Wait()
		var de *objstore.DeleteError
		if !errors.As(err, &de) || n != 2 || reqs != 2 || len(de.Failed) != 2 {
			t.Fatalf("deleted %d in %d requests, err %v", n, reqs, err)
		}
	})
}

// TestDryRunOverlay: writes land in the overlay and read back (Get, Head,
// PutIfAbsent), never in the store; deletes do nothing; listings are the
// store's.
func TestDryRunOverlay(t *testing.T) {
	ctx := context.Background()
	disk, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := disk.Put(ctx, "a", []byte("old")); err != nil {
		t.Fatal(err)
	}
	o := objstore.NewOverlay(disk)
	if err := o.Put(ctx, "a", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := o.PutIfAbsent(ctx, "b", []byte("bb")); err != nil {
		t.Fatal(err)
	}
	if err := o.PutIfAbsent(ctx, "b", []byte("again")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second PutIfAbsent: %v", err)
	}
	if b, err := o.Get(ctx, "a"); err != nil || string(b) != "new" {
		t.Fatalf("overlay Get a = %q, %v", b, err)
	}
	if oi, err := o.Head(ctx, "b"); err != nil || oi.Size != 2 {
		t.Fatalf("overlay Head b = %+v, %v", oi, err)
	}
	if err := o.Delete(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if b, err := disk.Get(ctx, "a"); err != nil || string(b) != "old" {
		t.Fatalf("store a = %q, %v: the overlay wrote through", b, err)
	}
	if _, err := disk.Head(ctx, "b"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("store b: %v, want ErrNotExist", err)
	}
	page, err := o.List(ctx, objstore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, oi := range page.Objects {
		keys = append(keys, oi.Key)
	}
	if !slices.Equal(keys, []string{"a"}) {
		t.Fatalf("overlay listing %v, want the store's [a]", keys)
	}
}

package table

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestOpenGetRoundTrips counts the requests and the critical path of open +
// get by key, and of Checkout, on a table of 1,000 versions whose floor is
// raised. The store adds the s3 profile's latency and runs in a synctest
// bubble: concurrent requests wait together on its fake clock, so the
// elapsed time is exactly the critical path's latency, with no real sleep.
// Pinned to format 2 (data file per write, deletion vectors);
// TestOpenGetRoundTripsFormat3 is its twin on the default format.
func TestOpenGetRoundTrips(t *testing.T) {
	testOpenGetRoundTrips(t, 2, []getCase{
		{"k010", 3, 3},      // the fragment has a deletion vector, fetched beside the data
		{"other-496", 2, 3}, // a one-row fragment, no deletion vector
	})
}

// TestOpenGetRoundTripsFormat3: the same history on format 3. The delete of
// k050 is an inline deletion (in the manifest: no vector to fetch), and the
// last upserts are inline rows: a get of one reads the manifest alone.
func TestOpenGetRoundTripsFormat3(t *testing.T) {
	testOpenGetRoundTrips(t, 3, []getCase{
		{"k010", 2, 3},      // manifest, then the data file; the deletion is inline
		{"other-496", 1, 2}, // an inline row: LIST -> GET, 60 ms
	})
}

// getCase is one get by key of testOpenGetRoundTrips: its GETs and its
// critical path's round trips (LIST first, then GETs).
type getCase struct {
	key        string
	gets       int64 // manifest, data file, deletion vector
	roundTrips int
}

func testOpenGetRoundTrips(t *testing.T, format uint64, cases []getCase) {
	const versions = 1000
	ctx := context.Background()
	mem := newMemStore()
	tbl, err := Create(ctx, mem, "reg", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil), Format: format})
	if err != nil {
		t.Fatal(err)
	}
	// v2: one fragment of 100 names; v3: a delete gives it a deletion vector.
	var rows []row
	for i := range 100 {
		rows = append(rows, row{fmt.Sprintf("k%03d", i), "u", int64(i)})
	}
	rec := regBatch(rows...)
	_, err = tbl.Append(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Delete(ctx, "k050"); err != nil {
		t.Fatal(err)
	}
	// Up to 1,000 versions of other names (their key bounds do not hold
	// "k0xx"), each upserted and deleted again but the last few, so that
	// the manifest stays small and the build quick.
	for i := 3; i < versions; i++ {
		name := fmt.Sprintf("other-%03d", (i-3)/2)
		if (i-3)%2 == 1 && i < versions-20 {
			_, err = tbl.Delete(ctx, name)
		} else {
			rec := regBatch(row{name, "u", int64(i)})
			_, err = tbl.Upsert(ctx, rec)
			rec.Release()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if v := tbl.Cached().Version; v != versions {
		t.Fatalf("built %d versions, want %d", v, versions)
	}
	if err := tbl.SetFloor(ctx, 500); err != nil {
		t.Fatal(err)
	}

	p := objstore.S3Profile()
	// measure runs fn on a fresh counting, path-tracking store with the s3
	// profile's latency, in a bubble.
	measure := func(t *testing.T, fn func(ctx context.Context, st objstore.Store) error) (objstore.Counts, objstore.Path, time.Duration) {
		t.Helper()
		var (
			c       objstore.Counts
			path    objstore.Path
			elapsed time.Duration
		)
		synctest.Test(t, func(t *testing.T) {
			cnt := objstore.NewCounting(mem)
			tr := objstore.NewPathTracker(objstore.NewLatency(cnt, p, nil), p)
			start := time.Now()
			if err := fn(ctx, tr); err != nil {
				t.Fatal(err)
			}
			elapsed, c, path = time.Since(start), cnt.Counts(), tr.Path()
		})
		return c, path, elapsed
	}
	check := func(t *testing.T, what string, c, wantC objstore.Counts, path objstore.Path, wantKinds []objstore.Kind, elapsed time.Duration) {
		t.Helper()
		if c != wantC {
			t.Errorf("%s: requests %s, want %s", what, c, wantC)
		}
		if fmt.Sprint(path.Kinds) != fmt.Sprint(wantKinds) {
			t.Errorf("%s: critical path %s, want %v", what, path, wantKinds)
		}
		if elapsed != path.Latency {
			t.Errorf("%s: took %s on the bubble's clock, the critical path says %s", what, elapsed, path.Latency)
		}
		t.Logf("%s: %s; %s", what, c, path)
	}

	t.Run("open+get", func(t *testing.T) {
		for _, tc := range cases {
			c, path, elapsed := measure(t, func(ctx context.Context, st objstore.Store) error {
				h, err := Open(ctx, st, "reg", Options{})
				if err != nil {
					return err
				}
				rec, err := h.Snapshot().Get(ctx, tc.key)
				if err != nil {
					return err
				}
				rec.Release()
				return nil
			})
			// At most 1 LIST + 2 GET round trips: 80 ms on the s3 profile
			// (before: the deletion vector was a third GET round trip, 100 ms).
			kinds := []objstore.Kind{objstore.KindList}
			for range tc.roundTrips - 1 {
				kinds = append(kinds, objstore.KindGet)
			}
			check(t, "open + get "+tc.key, c, objstore.Counts{List: 1, Get: tc.gets}, path, kinds, elapsed)
			if want := 40*time.Millisecond + time.Duration(tc.roundTrips-1)*20*time.Millisecond; elapsed != want {
				t.Errorf("open + get %s: %s on the s3 profile, want %s", tc.key, elapsed, want)
			}
		}
	})

	t.Run("latest needs no floor", func(t *testing.T) {
		c, path, elapsed := measure(t, func(ctx context.Context, st objstore.Store) error {
			h := &Table{store: st, root: "reg/", opts: Options{}.withDefaults()}
			_, err := h.Latest(ctx)
			return err
		})
		check(t, "latest", c, objstore.Counts{List: 1, Get: 1}, path,
			[]objstore.Kind{objstore.KindList, objstore.KindGet}, elapsed)
	})

	t.Run("checkout reads floor and manifest together", func(t *testing.T) {
		h, err := Open(ctx, mem, "reg", Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, path, elapsed := measure(t, func(ctx context.Context, st objstore.Store) error {
			h.store = st
			s, err := h.Checkout(ctx, 600)
			if err != nil {
				return err
			}
			if s.Version() != 600 {
				return fmt.Errorf("checkout 600 gave version %d", s.Version())
			}
			return nil
		})
		// Before: the floor's LIST, then the manifest's GET (60 ms).
		check(t, "checkout above the floor", c, objstore.Counts{List: 1, Get: 1}, path,
			[]objstore.Kind{objstore.KindList}, elapsed)
		// Below the floor: still refused, however the reads interleave.
		_, path, elapsed = measure(t, func(ctx context.Context, st objstore.Store) error {
			h.store = st
			if _, err := h.Checkout(ctx, 400); !errors.Is(err, ErrVersionPruned) {
				return fmt.Errorf("checkout 400 below floor 500 = %v, want ErrVersionPruned", err)
			}
			return nil
		})
		// The floor and the manifest, then the tags (none).
		if path.RoundTrips() != 2 || elapsed != path.Latency {
			t.Errorf("checkout below the floor: %s in %s, want 2 round trips", path, elapsed)
		}
	})
}

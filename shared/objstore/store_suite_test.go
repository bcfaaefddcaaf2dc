package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func TestDiskConformance(t *testing.T) {
	d, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, d, nil)
}

func TestS3Conformance(t *testing.T) {
	st, sent := instrumentedS3(t)
	testStore(t, st, sent)
}

// countingHTTP counts the HTTP requests an SDK client sends.
type countingHTTP struct {
	inner aws.HTTPClient
	n     atomic.Int64
}

func (c *countingHTTP) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.inner.Do(r)
}

// instrumentedS3 is an S3 store on a fresh versitygw bucket whose client
// counts the HTTP requests it sends.
func instrumentedS3(t *testing.T) (*objstore.S3, func() int64) {
	base := testenv.S3Store(t)
	opts := base.Client().Options()
	hc := &countingHTTP{inner: opts.HTTPClient}
	opts.HTTPClient = hc
	return objstore.NewS3(s3.New(opts), base.Bucket()), hc.n.Load
}

// testStore checks the Store contract. sent, if not nil, returns how many
// requests the store has sent so far (used to check that rejected calls send
// nothing).
func testStore(t *testing.T, s objstore.Store, sent func() int64) {
	ctx := context.Background()
	noRequest := func(t *testing.T, what string, f func()) {
		t.Helper()
		var before int64
		if sent != nil {
			before = sent()
		}
		f()
		if sent != nil {
			if n := sent() - before; n != 0 {
				t.Errorf("%s sent %d requests, want 0", what, n)
			}
		}
	}
	put := func(t *testing.T, key, data string) {
		t.Helper()
		if err := s.Put(ctx, key, []byte(data)); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}

	t.Run("GetPutHead", func(t *testing.T) {
		start := time.Now().Add(-time.Minute)
		put(t, "gph/a/b.txt", "hello")
		got, err := s.Get(ctx, "gph/a/b.txt")
		if err != nil || string(got) != "hello" {
			t.Fatalf("get = %q, %v; want hello", got, err)
		}
		info, err := s.Head(ctx, "gph/a/b.txt")
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != "gph/a/b.txt" || info.Size != 5 || info.LastModified.Before(start) || info.LastModified.After(time.Now().Add(time.Minute)) {
			t.Errorf("head = %+v", info)
		}
		put(t, "gph/a/b.txt", "replaced!")
		if got, _ := s.Get(ctx, "gph/a/b.txt"); string(got) != "replaced!" {
			t.Errorf("after overwrite get = %q", got)
		}
		put(t, "gph/empty", "")
		if got, err := s.Get(ctx, "gph/empty"); err != nil || len(got) != 0 {
			t.Errorf("empty object: %q, %v", got, err)
		}
		if info, err := s.Head(ctx, "gph/empty"); err != nil || info.Size != 0 {
			t.Errorf("empty head: %+v, %v", info, err)
		}
	})

	t.Run("NotExist", func(t *testing.T) {
		put(t, "ne/dir/child", "x")
		for _, k := range []string{"ne/missing", "ne/dir", "ne/dir/child/deeper"} {
			_, err := s.Get(ctx, k)
			if !errors.Is(err, objstore.ErrNotExist) || !strings.Contains(err.Error(), k) {
				t.Errorf("get %s: err = %v, want ErrNotExist naming the key", k, err)
			}
			_, err = s.Head(ctx, k)
			if !errors.Is(err, objstore.ErrNotExist) || !strings.Contains(err.Error(), k) {
				t.Errorf("head %s: err = %v, want ErrNotExist naming the key", k, err)
			}
		}
	})

	t.Run("PutIfAbsent", func(t *testing.T) {
		if err := s.PutIfAbsent(ctx, "pia/k", []byte("first")); err != nil {
			t.Fatal(err)
		}
		err := s.PutIfAbsent(ctx, "pia/k", []byte("second"))
		if !errors.Is(err, objstore.ErrExists) {
			t.Fatalf("second put-if-absent: %v, want ErrExists", err)
		}
		if got, _ := s.Get(ctx, "pia/k"); string(got) != "first" {
			t.Errorf("content = %q, want first", got)
		}
		// Put (unconditional) still overwrites.
		put(t, "pia/k", "third")
		if got, _ := s.Get(ctx, "pia/k"); string(got) != "third" {
			t.Errorf("content = %q, want third", got)
		}
	})

	t.Run("PutIfAbsentRace", func(t *testing.T) {
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		startGun := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-startGun
				errs[i] = s.PutIfAbsent(ctx, "race/manifest", fmt.Appendf(nil, "writer-%02d", i))
			})
		}
		close(startGun)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Errorf("writers %d and %d both won", winner, i)
				}
				winner = i
			case !errors.Is(err, objstore.ErrExists):
				t.Errorf("writer %d: %v, want nil or ErrExists", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer won")
		}
		got, err := s.Get(ctx, "race/manifest")
		if err != nil || string(got) != fmt.Sprintf("writer-%02d", winner) {
			t.Errorf("content = %q, %v; want the winner's (writer-%02d)", got, err, winner)
		}
	})

	t.Run("ListOrderAndPagination", func(t *testing.T) {
		// Byte order puts "c-x" < "c/..." < "c0": a directory walk that
		// visits c/ as a unit gets this wrong.
		keys := []string{"ls/a", "ls/b", "ls/c-x", "ls/c/d", "ls/c/e/f", "ls/c0", "ls/z"}
		for i, k := range slices.Backward(keys) {
			put(t, k, strings.Repeat("x", i+1))
		}
		put(t, "lsx", "outside the prefix")
		put(t, "l", "outside the prefix")

		var all []string
		err := objstore.ListAll(ctx, s, "ls/", "", func(o objstore.ObjectInfo) error {
			all = append(all, o.Key)
			want := slices.Index(keys, o.Key) + 1
			if o.Size != int64(want) || o.LastModified.IsZero() {
				t.Errorf("list entry %+v: want size %d and a LastModified", o, want)
			}
			return nil
		})
		if err != nil || !slices.Equal(all, keys) {
			t.Fatalf("ListAll = %q, %v; want %q", all, err, keys)
		}
		if !sort.StringsAreSorted(all) {
			t.Errorf("not sorted: %q", all)
		}

		// One key per page, following StartAfter.
		var paged []string
		after := ""
		for i := 0; ; i++ {
			if i > len(keys)+1 {
				t.Fatal("pagination does not end")
			}
			page, err := s.List(ctx, objstore.ListOptions{Prefix: "ls/", StartAfter: after, MaxKeys: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Objects) > 1 {
				t.Fatalf("MaxKeys 1 returned %d objects", len(page.Objects))
			}
			for _, o := range page.Objects {
				paged = append(paged, o.Key)
				after = o.Key
			}
			wantTrunc := len(paged) < len(keys)
			if page.Truncated != wantTrunc {
				t.Errorf("after %d keys Truncated = %v, want %v", len(paged), page.Truncated, wantTrunc)
			}
			if !page.Truncated {
				break
			}
		}
		if !slices.Equal(paged, keys) {
			t.Errorf("paged = %q, want %q", paged, keys)
		}

		// StartAfter a key in the middle, a key that does not exist, and a partial-segment prefix.
		cases := []struct {
			opts objstore.ListOptions
			want []string
		}{
			{objstore.ListOptions{Prefix: "ls/", StartAfter: "ls/c-x"}, keys[3:]},
			{objstore.ListOptions{Prefix: "ls/", StartAfter: "ls/bb"}, keys[2:]},
			{objstore.ListOptions{Prefix: "ls/c"}, []string{"ls/c-x", "ls/c/d", "ls/c/e/f", "ls/c0"}},
			{objstore.ListOptions{Prefix: "ls/c/"}, []string{"ls/c/d", "ls/c/e/f"}},
			{objstore.ListOptions{Prefix: "ls/", MaxKeys: 3}, keys[:3]},
			{objstore.ListOptions{Prefix: "ls/nothing/"}, nil},
			{objstore.ListOptions{Prefix: "ls/", StartAfter: "ls/z"}, nil},
		}
		for _, c := range cases {
			page, err := s.List(ctx, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range page.Objects {
				got = append(got, o.Key)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("List(%+v) = %q, want %q", c.opts, got, c.want)
			}
		}
	})

	t.Run("DeleteMissingKeys", func(t *testing.T) {
		put(t, "del/a", "a")
		put(t, "del/b", "b")
		if err := s.Delete(ctx, []string{"del/a", "del/never-existed", "del/b"}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		for _, k := range []string{"del/a", "del/b"} {
			if _, err := s.Head(ctx, k); !errors.Is(err, objstore.ErrNotExist) {
				t.Errorf("%s after delete: %v", k, err)
			}
		}
		if err := s.Delete(ctx, []string{"del/a", "del/b"}); err != nil {
			t.Errorf("deleting deleted keys: %v", err)
		}
		if err := s.Delete(ctx, nil); err != nil {
			t.Errorf("empty delete: %v", err)
		}
	})

	t.Run("DeleteKeyLimit", func(t *testing.T) {
		keys := make([]string, objstore.MaxDeleteKeys+1)
		for i := range keys {
			keys[i] = fmt.Sprintf("lim/%04d", i)
		}
		noRequest(t, "delete of 1001 keys", func() {
			if err := s.Delete(ctx, keys); !errors.Is(err, objstore.ErrTooManyKeys) {
				t.Errorf("delete 1001 keys: %v, want ErrTooManyKeys", err)
			}
		})
		if err := s.Delete(ctx, keys[:objstore.MaxDeleteKeys]); err != nil {
			t.Errorf("delete 1000 missing keys: %v", err)
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		for _, k := range []string{"../x", "/abs", "a/./b", "a/../b", "a/..", "", `a\b`} {
			noRequest(t, fmt.Sprintf("calls with key %q", k), func() {
				check := func(op string, err error) {
					if !errors.Is(err, objstore.ErrInvalidKey) {
						t.Errorf("%s %q: %v, want ErrInvalidKey", op, k, err)
					}
				}
				_, err := s.Get(ctx, k)
				check("get", err)
				_, err = s.Head(ctx, k)
				check("head", err)
				check("put", s.Put(ctx, k, []byte("x")))
				check("put-if-absent", s.PutIfAbsent(ctx, k, []byte("x")))
				check("delete", s.Delete(ctx, []string{"fine/key", k}))
			})
		}
	})

	t.Run("DeleteAllBatches", func(t *testing.T) {
		var keys []string
		for i := range 25 {
			k := fmt.Sprintf("da/%02d", i)
			keys = append(keys, k)
			if i%5 != 0 { // every fifth key is already gone
				put(t, k, "x")
			}
		}
		c := objstore.NewCounting(s)
		n, err := objstore.DeleteAll(ctx, c, keys, 10)
		if err != nil || n != 25 {
			t.Fatalf("DeleteAll = %d, %v; want 25, nil", n, err)
		}
		want := objstore.Counts{DeleteRequests: 3, DeleteKeys: 25}
		if got := c.Counts(); got != want {
			t.Errorf("counts = %v, want %v", got, want)
		}
		page, err := s.List(ctx, objstore.ListOptions{Prefix: "da/"})
		if err != nil || len(page.Objects) != 0 {
			t.Errorf("after DeleteAll list = %+v, %v", page.Objects, err)
		}
	})
}

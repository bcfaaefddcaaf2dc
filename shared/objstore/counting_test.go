package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

func newDisk(t *testing.T) *objstore.Disk {
	t.Helper()
	d, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCountingExact(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(newDisk(t))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Put(ctx, "a", []byte("1")))
	must(c.PutIfAbsent(ctx, "b", []byte("2")))
	if err := c.PutIfAbsent(ctx, "b", []byte("2")); !errors.Is(err, objstore.ErrExists) { // failed, still sent
		t.Fatal(err)
	}
	_, err := c.Get(ctx, "a")
	must(err)
	if _, err := c.Get(ctx, "missing"); !errors.Is(err, objstore.ErrNotExist) { // failed, still sent
		t.Fatal(err)
	}
	_, err = c.Head(ctx, "b")
	must(err)
	_, err = c.List(ctx, objstore.ListOptions{})
	must(err)
	must(c.Delete(ctx, []string{"a", "b", "gone"}))

	// Rejected before sending: not counted.
	_, _ = c.Get(ctx, "../x")
	_ = c.Put(ctx, "/abs", nil)
	_ = c.Delete(ctx, make([]string, objstore.MaxDeleteKeys+1))
	_ = c.Delete(ctx, []string{"ok", "a/./b"})
	_ = c.Delete(ctx, nil)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = c.Get(cctx, "a")

	want := objstore.Counts{Get: 2, Head: 1, Put: 3, List: 1, DeleteRequests: 1, DeleteKeys: 3}
	got := c.Counts()
	if got != want {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	if got.Total() != 8 {
		t.Errorf("Total = %d, want 8", got.Total())
	}
	if s := got.String(); s != "GET=2 HEAD=1 PUT=3 LIST=1 DELETE=1 (keys=3)" {
		t.Errorf("String = %q", s)
	}

	snap := c.Counts()
	_, _ = c.List(ctx, objstore.ListOptions{Prefix: "x"})
	_ = c.Delete(ctx, []string{"p", "q"})
	diff := c.Counts().Sub(snap)
	if diff != (objstore.Counts{List: 1, DeleteRequests: 1, DeleteKeys: 2}) {
		t.Errorf("Sub = %v", diff)
	}
	if sum := snap.Add(diff); sum != c.Counts() {
		t.Errorf("Add = %v, want %v", sum, c.Counts())
	}
	c.Reset()
	if c.Counts() != (objstore.Counts{}) {
		t.Errorf("after Reset: %v", c.Counts())
	}
}

func TestCountingConcurrent(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(newDisk(t))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 25 {
				k := fmt.Sprintf("k/%d/%d", i, j)
				_ = c.Put(ctx, k, []byte("x"))
				_, _ = c.Get(ctx, k)
			}
		})
	}
	wg.Wait()
	if got := c.Counts(); got != (objstore.Counts{Get: 200, Put: 200}) {
		t.Errorf("counts = %v", got)
	}
}

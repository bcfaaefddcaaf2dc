package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestWriteThrottle: a partition takes WritesPerSecond keys a second (one
// second of burst), refuses the rest with ErrSlowDown deleting nothing, and
// refills with time; partitions are independent.
func TestWriteThrottle(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Unix(1e9, 0))
	mem, err0 := objstore.NewDisk(t.TempDir())
	if err0 != nil {
		t.Fatal(err0)
	}
	keys := func(prefix string, n int) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = fmt.Sprintf("%s/k%04d", prefix, i)
			if err := mem.Put(ctx, ks[i], []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		return ks
	}
	w := objstore.WithWriteThrottle(mem, objstore.ThrottleOptions{WritesPerSecond: 2000, Clock: clk,
		Partition: func(k string) string { return k[:1] }})
	a := keys("a", 3000)
	if err := w.Delete(ctx, a[:1000]); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, a[1000:2000]); err != nil {
		t.Fatal(err)
	}
	err := w.Delete(ctx, a[2000:])
	if !errors.Is(err, objstore.ErrSlowDown) {
		t.Fatalf("third 1,000 keys within the second: %v, want SlowDown", err)
	}
	if _, err := mem.Get(ctx, a[2000]); err != nil {
		t.Fatalf("a refused delete deleted: %v", err)
	}
	b := keys("b", 1000)
	if err := w.Delete(ctx, b); err != nil {
		t.Fatalf("another partition: %v", err)
	}
	clk.Advance(500 * time.Millisecond)
	if err := w.Delete(ctx, a[2000:]); err != nil {
		t.Fatalf("after half a second (1,000 keys refilled): %v", err)
	}
	if got := w.Throttled(); got.Requests != 1 || got.Keys != 1000 {
		t.Fatalf("throttled %+v, want 1 request of 1,000 keys", got)
	}
}

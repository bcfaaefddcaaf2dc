package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

var errBoom = errors.New("boom")

func TestFaultyBeforeIsNotSent(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(newDisk(t))
	f := objstore.NewFaulty(c)
	f.SetBefore(objstore.FailKind(objstore.KindPut, "", errBoom))
	if err := f.Put(ctx, "k", []byte("x")); !errors.Is(err, errBoom) {
		t.Fatalf("put: %v, want boom", err)
	}
	if err := f.PutIfAbsent(ctx, "k", []byte("x")); !errors.Is(err, errBoom) {
		t.Fatalf("put-if-absent: %v, want boom", err)
	}
	if got := c.Counts(); got.Put != 0 {
		t.Errorf("inner store saw %d PUTs, want 0", got.Put)
	}
	if _, err := f.Get(ctx, "k"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("object written despite before-fault: %v", err)
	}
	if n := f.Requests(); n != 3 {
		t.Errorf("Requests = %d, want 3", n)
	}
}

func TestFaultyAfterIsApplied(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	f := objstore.NewFaulty(d)
	f.SetAfter(objstore.FailNth(1, nil))
	err := f.PutIfAbsent(ctx, "v/1", []byte("mine"))
	if !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("put-if-absent: %v, want ErrInjected", err)
	}
	// The write happened although the caller saw an error.
	if got, err := d.Get(ctx, "v/1"); err != nil || string(got) != "mine" {
		t.Errorf("inner = %q, %v; want the write applied", got, err)
	}
	// Request 2 is not failed; a retry now sees ErrExists.
	if err := f.PutIfAbsent(ctx, "v/1", []byte("mine")); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("retry: %v, want ErrExists", err)
	}
	f.SetAfter(objstore.FailKind(objstore.KindDelete, "v/", errBoom))
	if err := f.Delete(ctx, []string{"other", "v/1"}); !errors.Is(err, errBoom) {
		t.Errorf("delete: %v, want boom", err)
	}
	if _, err := d.Head(ctx, "v/1"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("delete not applied: %v", err)
	}
}

func TestFaultyNumberingAndHelpers(t *testing.T) {
	ctx := context.Background()
	f := objstore.NewFaulty(newDisk(t))
	var mu sync.Mutex
	var seen []string
	f.SetBefore(func(n int64, op objstore.Op) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%d:%s:%s:%v:%d", n, op.Kind, op.Key, op.Conditional, len(op.Keys)))
		return nil
	})
	_ = f.Put(ctx, "a", nil)
	_ = f.PutIfAbsent(ctx, "b", nil)
	_, _ = f.Get(ctx, "a")
	_, _ = f.Head(ctx, "a")
	_, _ = f.List(ctx, objstore.ListOptions{Prefix: "p/"})
	_ = f.Delete(ctx, []string{"a", "b"})
	_, _ = f.Get(ctx, "../bad") // rejected before sending: no number
	_ = f.Delete(ctx, nil)
	want := "[1:PUT:a:false:0 2:PUT:b:true:0 3:GET:a:false:0 4:HEAD:a:false:0 5:LIST:p/:false:0 6:DELETE::false:2]"
	if fmt.Sprint(seen) != want {
		t.Errorf("ops = %v\nwant %s", seen, want)
	}
	if f.Requests() != 6 {
		t.Errorf("Requests = %d, want 6", f.Requests())
	}

	f.Reset()
	if f.Requests() != 0 {
		t.Errorf("after Reset Requests = %d", f.Requests())
	}
	f.SetBefore(objstore.FailNth(2, nil))
	if err := f.Put(ctx, "x", nil); err != nil {
		t.Errorf("request 1: %v", err)
	}
	if err := f.Put(ctx, "y", nil); !errors.Is(err, objstore.ErrInjected) {
		t.Errorf("request 2: %v, want ErrInjected", err)
	}
	if _, err := f.Get(ctx, "x"); err != nil {
		t.Errorf("request 3: %v", err)
	}

	fk := objstore.FailKind(objstore.KindGet, "_versions/", nil)
	for _, c := range []struct {
		op   objstore.Op
		fail bool
	}{
		{objstore.Op{Kind: objstore.KindGet, Key: "_versions/1.manifest"}, true},
		{objstore.Op{Kind: objstore.KindGet, Key: "data/1.lance"}, false},
		{objstore.Op{Kind: objstore.KindHead, Key: "_versions/1.manifest"}, false},
	} {
		if err := fk(1, c.op); (err != nil) != c.fail || (err != nil && !errors.Is(err, objstore.ErrInjected)) {
			t.Errorf("FailKind on %+v = %v, want fail=%v", c.op, err, c.fail)
		}
	}
}

func TestFaultyConcurrent(t *testing.T) {
	ctx := context.Background()
	f := objstore.NewFaulty(newDisk(t))
	f.SetBefore(func(n int64, op objstore.Op) error {
		if n%2 == 0 {
			return objstore.ErrInjected
		}
		return nil
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := range 8 {
		wg.Go(func() {
			for j := range 25 {
				err := f.Put(ctx, fmt.Sprintf("k/%d/%d", i, j), []byte("x"))
				if errors.Is(err, objstore.ErrInjected) {
					mu.Lock()
					failed++
					mu.Unlock()
				}
				if j == 10 && i == 0 {
					f.SetAfter(nil) // setters race with requests safely
				}
			}
		})
	}
	wg.Wait()
	if f.Requests() != 200 || failed != 100 {
		t.Errorf("requests %d failed %d, want 200 and 100", f.Requests(), failed)
	}
}

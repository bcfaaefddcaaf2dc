package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrInjected is the error fault helpers return when given a nil error.
var ErrInjected = errors.New("injected fault")

// Kind is a request kind, as seen by a FaultFunc.
type Kind string

const (
	KindGet    Kind = "GET"
	KindHead   Kind = "HEAD"
	KindPut    Kind = "PUT" // Put and PutIfAbsent (Conditional)
	KindList   Kind = "LIST"
	KindDelete Kind = "DELETE"
)

// Op describes one request. Key is the object key (the prefix for List);
// Keys is set for Delete; Conditional is set for PutIfAbsent.
type Op struct {
	Kind        Kind
	Key         string
	Keys        []string
	Conditional bool
}

// FaultFunc decides whether request number n (1-based, counted since
// NewFaulty or Reset) fails. A nil return lets it through.
type FaultFunc func(n int64, op Op) error

// Faulty wraps a Store and injects errors, for tests.
//
// The before hook runs first: if it returns an error, the request is not
// sent and that error is returned. Otherwise the request is sent and the
// after hook runs: if it returns an error, that error is returned in place
// of the real result, which models a timeout after the server applied the
// request. Both hooks see the same n. Calls rejected before sending
// (invalid key, too many keys, empty delete, cancelled context) are passed
// through without a number or hooks. Safe for concurrent use; hooks may be
// called concurrently.
type Faulty struct {
	inner  Store
	n      atomic.Int64
	mu     sync.RWMutex
	before FaultFunc
	after  FaultFunc
}

var _ Store = (*Faulty)(nil)

// NewFaulty wraps inner with no faults set.
func NewFaulty(inner Store) *Faulty { return &Faulty{inner: inner} }

// Inner is the wrapped store.
func (f *Faulty) Inner() Store { return f.inner }

// SetBefore sets the hook run before sending (nil clears it).
func (f *Faulty) SetBefore(fn FaultFunc) {
	f.mu.Lock()
	f.before = fn
	f.mu.Unlock()
}

// SetAfter sets the hook run after the request was sent (nil clears it).
func (f *Faulty) SetAfter(fn FaultFunc) {
	f.mu.Lock()
	f.after = fn
	f.mu.Unlock()
}

// Requests is how many requests were numbered since NewFaulty or Reset,
// including ones a before hook failed.
func (f *Faulty) Requests() int64 { return f.n.Load() }

// Reset clears both hooks and restarts request numbering at 1.
func (f *Faulty) Reset() {
	f.mu.Lock()
	f.before, f.after = nil, nil
	f.n.Store(0)
	f.mu.Unlock()
}

func (f *Faulty) hooks() (FaultFunc, FaultFunc) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.before, f.after
}

// do runs one request through the hooks. send performs it.
func (f *Faulty) do(ctx context.Context, op Op, send func() error) error {
	if err := precheck(ctx, op); err != nil {
		return err
	}
	n := f.n.Add(1)
	before, after := f.hooks()
	if before != nil {
		if err := before(n, op); err != nil {
			return err
		}
	}
	err := send()
	if after != nil {
		if aerr := after(n, op); aerr != nil {
			return aerr
		}
	}
	return err
}

func (f *Faulty) Get(ctx context.Context, key string) ([]byte, error) {
	var b []byte
	err := f.do(ctx, Op{Kind: KindGet, Key: key}, func() (err error) {
		b, err = f.inner.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (f *Faulty) Head(ctx context.Context, key string) (ObjectInfo, error) {
	var oi ObjectInfo
	err := f.do(ctx, Op{Kind: KindHead, Key: key}, func() (err error) {
		oi, err = f.inner.Head(ctx, key)
		return err
	})
	if err != nil {
		return ObjectInfo{}, err
	}
	return oi, nil
}

func (f *Faulty) Put(ctx context.Context, key string, data []byte) error {
	return f.do(ctx, Op{Kind: KindPut, Key: key}, func() error { return f.inner.Put(ctx, key, data) })
}

func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return f.do(ctx, Op{Kind: KindPut, Key: key, Conditional: true}, func() error { return f.inner.PutIfAbsent(ctx, key, data) })
}

func (f *Faulty) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	var p ListPage
	err := f.do(ctx, Op{Kind: KindList, Key: opts.Prefix}, func() (err error) {
		p, err = f.inner.List(ctx, opts)
		return err
	})
	if err != nil {
		return ListPage{}, err
	}
	return p, nil
}

func (f *Faulty) Delete(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return f.inner.Delete(ctx, keys)
	}
	return f.do(ctx, Op{Kind: KindDelete, Keys: keys}, func() error { return f.inner.Delete(ctx, keys) })
}

func injected(err error, format string, args ...any) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", ErrInjected, fmt.Sprintf(format, args...))
}

// FailNth fails request number n (1-based) with err (ErrInjected if nil).
func FailNth(n int64, err error) FaultFunc {
	return func(i int64, op Op) error {
		if i == n {
			return injected(err, "request %d (%s %s)", i, op.Kind, op.Key)
		}
		return nil
	}
}

// FailKind fails every request of kind whose key starts with keyPrefix (for
// Delete: any of whose keys does; for List: whose prefix does) with err
// (ErrInjected if nil). An empty keyPrefix matches every request of kind.
func FailKind(kind Kind, keyPrefix string, err error) FaultFunc {
	return func(i int64, op Op) error {
		if op.Kind != kind {
			return nil
		}
		match := strings.HasPrefix(op.Key, keyPrefix)
		for _, k := range op.Keys {
			match = match || strings.HasPrefix(k, keyPrefix)
		}
		if match {
			return injected(err, "request %d (%s %s)", i, op.Kind, op.Key)
		}
		return nil
	}
}

package objstore

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Counts is a tally of requests by kind. PutIfAbsent counts as Put.
// DeleteKeys is the number of keys carried by Delete requests.
type Counts struct {
	Get, Head, Put, List, DeleteRequests, DeleteKeys int64
}

// Sub returns c - o, field by field (the requests made between two snapshots).
func (c Counts) Sub(o Counts) Counts {
	return Counts{
		Get: c.Get - o.Get, Head: c.Head - o.Head, Put: c.Put - o.Put, List: c.List - o.List,
		DeleteRequests: c.DeleteRequests - o.DeleteRequests, DeleteKeys: c.DeleteKeys - o.DeleteKeys,
	}
}

// Add returns c + o, field by field.
func (c Counts) Add(o Counts) Counts {
	return Counts{
		Get: c.Get + o.Get, Head: c.Head + o.Head, Put: c.Put + o.Put, List: c.List + o.List,
		DeleteRequests: c.DeleteRequests + o.DeleteRequests, DeleteKeys: c.DeleteKeys + o.DeleteKeys,
	}
}

// Total is the number of requests (not keys).
func (c Counts) Total() int64 {
	return c.Get + c.Head + c.Put + c.List + c.DeleteRequests
}

func (c Counts) String() string {
	return fmt.Sprintf("GET=%d HEAD=%d PUT=%d LIST=%d DELETE=%d (keys=%d)",
		c.Get, c.Head, c.Put, c.List, c.DeleteRequests, c.DeleteKeys)
}

// Counting wraps a Store and counts the requests made through it, by kind.
// A request counts once sent, whether or not it succeeded; calls rejected
// before sending (invalid key, too many keys, empty delete, cancelled
// context) do not count. Safe for concurrent use.
type Counting struct {
	inner                                            Store
	get, head, put, list, deleteRequests, deleteKeys atomic.Int64
}

var _ Store = (*Counting)(nil)

// NewCounting wraps inner.
func NewCounting(inner Store) *Counting { return &Counting{inner: inner} }

// Inner is the wrapped store.
func (c *Counting) Inner() Store { return c.inner }

// Counts is a snapshot of the counters.
func (c *Counting) Counts() Counts {
	return Counts{
		Get: c.get.Load(), Head: c.head.Load(), Put: c.put.Load(), List: c.list.Load(),
		DeleteRequests: c.deleteRequests.Load(), DeleteKeys: c.deleteKeys.Load(),
	}
}

// Reset zeroes the counters.
func (c *Counting) Reset() {
	for _, a := range []*atomic.Int64{&c.get, &c.head, &c.put, &c.list, &c.deleteRequests, &c.deleteKeys} {
		a.Store(0)
	}
}

func (c *Counting) Get(ctx context.Context, key string) ([]byte, error) {
	if err := precheck(ctx, Op{Kind: KindGet, Key: key}); err != nil {
		return nil, err
	}
	c.get.Add(1)
	return c.inner.Get(ctx, key)
}

func (c *Counting) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := precheck(ctx, Op{Kind: KindHead, Key: key}); err != nil {
		return ObjectInfo{}, err
	}
	c.head.Add(1)
	return c.inner.Head(ctx, key)
}

func (c *Counting) Put(ctx context.Context, key string, data []byte) error {
	if err := precheck(ctx, Op{Kind: KindPut, Key: key}); err != nil {
		return err
	}
	c.put.Add(1)
	return c.inner.Put(ctx, key, data)
}

func (c *Counting) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := precheck(ctx, Op{Kind: KindPut, Key: key, Conditional: true}); err != nil {
		return err
	}
	c.put.Add(1)
	return c.inner.PutIfAbsent(ctx, key, data)
}

func (c *Counting) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	if err := precheck(ctx, Op{Kind: KindList, Key: opts.Prefix}); err != nil {
		return ListPage{}, err
	}
	c.list.Add(1)
	return c.inner.List(ctx, opts)
}

func (c *Counting) Delete(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return c.inner.Delete(ctx, keys)
	}
	if err := precheck(ctx, Op{Kind: KindDelete, Keys: keys}); err != nil {
		return err
	}
	c.deleteRequests.Add(1)
	c.deleteKeys.Add(int64(len(keys)))
	return c.inner.Delete(ctx, keys)
}

// precheck returns the error a store gives without sending a request:
// cancelled context, invalid key, too many keys. Wrappers use it so that
// such calls are neither counted nor fault-injected.
func precheck(ctx context.Context, op Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch op.Kind {
	case KindList:
		return nil
	case KindDelete:
		if len(op.Keys) > MaxDeleteKeys {
			return fmt.Errorf("delete %d keys: %w", len(op.Keys), ErrTooManyKeys)
		}
		for _, k := range op.Keys {
			if err := ValidateKey(k); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
		}
		return nil
	default:
		return ValidateKey(op.Key)
	}
}

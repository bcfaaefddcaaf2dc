package lock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// InProcess is a Locker for one process, for tests of code that takes locks.
type InProcess struct {
	clock clock.Clock
	st    *inProcessState
}

type inProcessState struct {
	mu    sync.Mutex
	locks map[string]*record
}

// record is the stored state of one lock name. A released lock keeps its
// token (so the sequence continues) with an empty owner.
type record struct {
	Name    string `json:"name"`
	Owner   string `json:"owner,omitempty"`
	Token   uint64 `json:"token"`
	Expires int64  `json:"expires_at_ms"` // unix milliseconds
}

func (r *record) free(now time.Time) bool {
	return r == nil || r.Owner == "" || r.Expires < now.UnixMilli()
}

func (r *record) lease(d time.Duration) *Lease {
	return &Lease{Name: r.Name, Owner: r.Owner, Token: r.Token, Expires: time.UnixMilli(r.Expires), Duration: d}
}

func (r *record) held(l *Lease) bool {
	return r != nil && r.Owner != "" && r.Owner == l.Owner && r.Token == l.Token
}

func (r *record) heldError() error {
	return &heldError{name: r.Name, owner: r.Owner, token: r.Token, until: time.UnixMilli(r.Expires)}
}

// acquire, renew, release and check are the state transitions shared by
// InProcess and FileLocker; the caller holds whatever makes them atomic.
func (r *record) acquire(name string, opts AcquireOptions, now time.Time) (*record, error) {
	if !r.free(now) {
		return nil, r.heldError()
	}
	next := &record{Name: name, Owner: opts.Owner, Token: 1, Expires: expiryFor(now, opts.Lease).UnixMilli()}
	if r != nil {
		next.Token = r.Token + 1
	}
	return next, nil
}

func (r *record) renew(l *Lease, now time.Time) (*record, error) {
	if !r.held(l) {
		return nil, lostError(l, r)
	}
	next := *r
	next.Expires = expiryFor(now, l.Duration).UnixMilli()
	return &next, nil
}

func (r *record) release(l *Lease) (*record, error) {
	if !r.held(l) {
		return nil, lostError(l, r)
	}
	return &record{Name: r.Name, Token: r.Token}, nil
}

func (r *record) check(l *Lease, now time.Time) error {
	if !r.held(l) {
		return lostError(l, r)
	}
	if r.Expires < now.UnixMilli() {
		return fmt.Errorf("%v: %w", l, ErrLeaseExpired)
	}
	return nil
}

func lostError(l *Lease, r *record) error {
	switch {
	case r == nil:
		return fmt.Errorf("%v: %w: no such lock", l, ErrLeaseLost)
	case r.Owner == "":
		return fmt.Errorf("%v: %w: released (token %d)", l, ErrLeaseLost, r.Token)
	default:
		return fmt.Errorf("%v: %w: now held by %q token %d", l, ErrLeaseLost, r.Owner, r.Token)
	}
}

// NewInProcess returns an empty in-process locker on clock.
func NewInProcess(clock clock.Clock) *InProcess {
	return &InProcess{clock: clock, st: &inProcessState{locks: make(map[string]*record)}}
}

var _ Locker = (*InProcess)(nil)

func (p *InProcess) Acquire(ctx context.Context, name string, opts AcquireOptions) (*Lease, error) {
	return acquireLoop(ctx, p.clock, name, opts, func(now time.Time) (*Lease, error) {
		p.st.mu.Lock()
		defer p.st.mu.Unlock()
		next, err := p.st.locks[name].acquire(name, opts, now)
		if err != nil {
			return nil, err
		}
		p.st.locks[name] = next
		return next.lease(opts.Lease), nil
	})
}

func (p *InProcess) Renew(ctx context.Context, l *Lease) (*Lease, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	next, err := p.st.locks[l.Name].renew(l, p.clock.Now())
	if err != nil {
		return nil, err
	}
	p.st.locks[l.Name] = next
	return next.lease(l.Duration), nil
}

func (p *InProcess) Release(ctx context.Context, l *Lease) error {
	if err := l.validate(); err != nil {
		return err
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	next, err := p.st.locks[l.Name].release(l)
	if err != nil {
		return err
	}
	p.st.locks[l.Name] = next
	return nil
}

func (p *InProcess) Check(ctx context.Context, l *Lease) error {
	if err := l.validate(); err != nil {
		return err
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	return p.st.locks[l.Name].check(l, p.clock.Now())
}

package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// EmbeddedOptions configure an Embedded queue.
type EmbeddedOptions struct {
	// Clock decides visibility (default the real clock); tests inject a
	// fake one.
	Clock clock.Clock
	// DefaultVisibility applies to Receive calls with zero visibility
	// (default 30 s, as on SQS).
	DefaultVisibility time.Duration
	// MaxReceives is the redrive policy's maxReceiveCount: a message received
	// this many times without an Ack moves to the dead-letter list instead of
	// being delivered again. Zero keeps retrying forever.
	MaxReceives int

	// Test knobs for at-least-once behaviour.

	// DuplicateEvery, if positive, makes every Nth delivery leave a copy of
	// the message behind: same ID and body, visible at once, with its own
	// receipt, so acknowledging one copy does not remove the other.
	DuplicateEvery int
	// Shuffle, if set, returns visible messages in random order instead of
	// oldest first.
	Shuffle *rand.Rand
}

// Embedded is an in-process Queue with SQS semantics: visibility timeouts,
// receive counts, a redrive to a dead-letter list, and optional duplicate and
// out-of-order delivery. Safe for concurrent use.
type Embedded struct {
	opts EmbeddedOptions

	mu         sync.Mutex
	msgs       []*entry // in send order
	dead       []Delivery
	seq        int // message ids
	receipts   int
	deliveries int
}

type entry struct {
	id, receipt string
	body        []byte
	visibleAt   time.Time
	receives    int
}

var _ Queue = (*Embedded)(nil)

// NewEmbedded returns an empty queue.
func NewEmbedded(opts EmbeddedOptions) *Embedded {
	opts.Clock = clock.Or(opts.Clock)
	if opts.DefaultVisibility <= 0 {
		opts.DefaultVisibility = 30 * time.Second
	}
	return &Embedded{opts: opts}
}

// Send implements Queue.
func (q *Embedded) Send(ctx context.Context, msgs []Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validate(msgs); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.opts.Clock.Now()
	for _, m := range msgs {
		q.seq++
		q.msgs = append(q.msgs, &entry{id: "m" + strconv.Itoa(q.seq), body: slices.Clone(m.Body), visibleAt: now})
	}
	return nil
}

// Receive implements Queue.
func (q *Embedded) Receive(ctx context.Context, n int, visibility time.Duration) ([]Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if visibility <= 0 {
		visibility = q.opts.DefaultVisibility
	}
	n = max(n, 1)
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.opts.Clock.Now()
	var visible []*entry
	for _, e := range q.msgs {
		if !e.visibleAt.After(now) {
			visible = append(visible, e)
		}
	}
	if q.opts.Shuffle != nil {
		q.opts.Shuffle.Shuffle(len(visible), func(i, j int) { visible[i], visible[j] = visible[j], visible[i] })
	}
	var out []Delivery
	for _, e := range visible {
		if len(out) >= n {
			break
		}
		if q.opts.MaxReceives > 0 && e.receives >= q.opts.MaxReceives {
			q.remove(e)
			q.dead = append(q.dead, Delivery{ID: e.id, Body: slices.Clone(e.body), ReceiveCount: e.receives})
			continue
		}
		e.receives++
		q.receipts++
		e.receipt = e.id + "/" + strconv.Itoa(q.receipts)
		e.visibleAt = now.Add(visibility)
		out = append(out, Delivery{ID: e.id, Receipt: e.receipt, Body: slices.Clone(e.body), ReceiveCount: e.receives})
		q.deliveries++
		if q.opts.DuplicateEvery > 0 && q.deliveries%q.opts.DuplicateEvery == 0 {
			q.msgs = append(q.msgs, &entry{id: e.id, body: e.body, visibleAt: now, receives: e.receives - 1})
		}
	}
	return out, nil
}

func (q *Embedded) remove(e *entry) {
	q.msgs = slices.DeleteFunc(q.msgs, func(x *entry) bool { return x == e })
}

func (q *Embedded) find(d Delivery) (*entry, error) {
	if d.Receipt != "" {
		for _, e := range q.msgs {
			if e.receipt == d.Receipt {
				return e, nil
			}
		}
	}
	return nil, fmt.Errorf("message %s receipt %q: %w", d.ID, d.Receipt, ErrInvalidReceipt)
}

// Ack implements Queue. A receipt superseded by a later delivery of the same
// message is refused with ErrInvalidReceipt (SQS silently ignores it).
func (q *Embedded) Ack(ctx context.Context, d Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e, err := q.find(d)
	if err != nil {
		return err
	}
	q.remove(e)
	return nil
}

// Nack implements Queue.
func (q *Embedded) Nack(ctx context.Context, d Delivery, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e, err := q.find(d)
	if err != nil {
		return err
	}
	e.visibleAt = q.opts.Clock.Now().Add(max(delay, 0))
	return nil
}

// Len is the number of messages not yet acknowledged or dead-lettered,
// in flight or not, duplicates included.
func (q *Embedded) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

// DeadLetters returns the messages moved to the dead-letter list, with the
// receive count they had (Receipt is empty).
func (q *Embedded) DeadLetters() []Delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.dead)
}

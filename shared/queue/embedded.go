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
// receive counts, a redrive to a dead-letter list, fair delivery across
// message groups (as an SQS fair queue: Message.GroupKey on a standard
// queue; see fair), and optional duplicate and out-of-order delivery. Safe
// for concurrent use.
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
	group       string // Message.GroupKey ("" : a group of its own)
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
		q.msgs = append(q.msgs, &entry{id: "m" + strconv.Itoa(q.seq), group: m.GroupKey, body: slices.Clone(m.Body), visibleAt: now})
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
	visible = fair(visible)
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
			q.msgs = append(q.msgs, &entry{id: e.id, group: e.group, body: e.body, visibleAt: now, receives: e.receives - 1})
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

// fair orders visible messages (in send order) as a fair queue delivers
// them: round-robin over message groups, each group oldest first — the
// oldest of every group with a visible message, then the second of every
// group, and so on. A message without a group is a group of its own, so
// without groups the order is the send order. Hence a group's k-th visible
// message (k from 1) is delivered within the first sum over groups of
// min(k, that group's visible count) deliveries: a table's only message
// waits for at most one message of each other table, whatever their
// backlogs (docs/aws.md "Fair queues").
func fair(visible []*entry) []*entry {
	rank := make(map[string]int, 8)
	type ranked struct {
		e    *entry
		r, i int
	}
	rs := make([]ranked, len(visible))
	for i, e := range visible {
		r := 0
		if e.group != "" {
			r = rank[e.group]
			rank[e.group] = r + 1
		}
		rs[i] = ranked{e, r, i}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if a.r != b.r {
			return a.r - b.r
		}
		return a.i - b.i
	})
	out := make([]*entry, len(rs))
	for i, r := range rs {
		out[i] = r.e
	}
	return out
}

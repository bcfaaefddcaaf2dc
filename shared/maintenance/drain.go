package maintenance

import (
	"context"
	"log/slog"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/queue"
)

// LocalMessagesInFlight is how many messages DrainLocal's cleaner works on
// at once, as one Lambda cleaner invocation does (awsfn's
// CleanerMessagesInFlight): one message's change-record reads overlap
// another's deletes. Both share the Cleaner's limiters, so the keys deleted
// per second per prefix do not grow with it.
const LocalMessagesInFlight = 2

// DrainLocal runs the cleaner over an in-process queue until it is empty,
// LocalMessagesInFlight messages at a time; each onMessage (progress) is
// called after every message handled. Continuations a message sends back
// are drained too.
func DrainLocal(ctx context.Context, q queue.Queue, c *Cleaner, logger *slog.Logger, onMessage ...func()) (queue.DrainStats, error) {
	var mu sync.Mutex
	var total queue.DrainStats
	h := func(ctx context.Context, body []byte) error {
		err := c.Handle(ctx, body)
		mu.Lock()
		defer mu.Unlock()
		for _, f := range onMessage {
			f()
		}
		return err
	}
	for {
		// Each receiver takes one message at a time and stops when it finds
		// the queue empty; a continuation sent after a receiver stopped is
		// found by the next round, which runs until a round receives nothing.
		var g errgroup.Group
		received := 0
		for range LocalMessagesInFlight {
			g.Go(func() error {
				st, err := queue.Drain(ctx, q, h, queue.DrainOptions{Logger: logger, MaxReceives: 5, BatchSize: 1})
				mu.Lock()
				defer mu.Unlock()
				received += st.Received
				total.Received += st.Received
				total.Succeeded += st.Succeeded
				total.Failed += st.Failed
				total.DeadLettered += st.DeadLettered
				return err
			})
		}
		if err := g.Wait(); err != nil || received == 0 {
			return total, err
		}
	}
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
)

type fakeNow = fakeclock.Clock

func newFakeNow() *fakeNow { return fakeclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func bodies(n int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Body: fmt.Appendf(nil, `{"range":%d}`, i)}
	}
	return msgs
}

func TestEmbeddedAtLeastOnceWithDuplicatesAndReorder(t *testing.T) {
	ctx := context.Background()
	clock := newFakeNow()
	q := NewEmbedded(EmbeddedOptions{Clock: clock, DuplicateEvery: 4, Shuffle: rand.New(rand.NewPCG(1, 2))})
	const n = 40
	if err := q.Send(ctx, bodies(n)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var order []string
	failedOnce := map[string]bool{}
	h := func(_ context.Context, body []byte) error {
		b := string(body)
		order = append(order, b)
		// Every fifth message fails on its first attempt.
		if strings.HasSuffix(b, "5}") && !failedOnce[b] {
			failedOnce[b] = true
			return errors.New("transient")
		}
		seen[b]++
		return nil
	}
	var total DrainStats
	for round := 0; q.Len() > 0; round++ {
		if round > 10 {
			t.Fatalf("queue not drained after %d rounds: %d left", round, q.Len())
		}
		st, err := Drain(ctx, q, h, DrainOptions{BatchSize: 3, Visibility: time.Minute, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		total.Received += st.Received
		total.Succeeded += st.Succeeded
		total.Failed += st.Failed
		clock.Advance(time.Minute) // failed messages come back
	}
	for _, m := range bodies(n) {
		if seen[string(m.Body)] == 0 {
			t.Errorf("%s never handled successfully", m.Body)
		}
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	if dups == 0 || total.Failed != 4 || total.Succeeded != n+dups || total.Received != total.Succeeded+total.Failed {
		t.Errorf("duplicates %d, stats %+v", dups, total)
	}
	inOrder := true
	for i, m := range bodies(n) {
		if i < len(order) && order[i] != string(m.Body) {
			inOrder = false
		}
	}
	if inOrder {
		t.Error("deliveries came in send order despite Shuffle")
	}
}

func TestEmbeddedVisibilityExpiryRedelivers(t *testing.T) {
	ctx := context.Background()
	clock := newFakeNow()
	q := NewEmbedded(EmbeddedOptions{Clock: clock})
	if err := q.Send(ctx, bodies(1)); err != nil {
		t.Fatal(err)
	}
	first := receiveOne(t, q, 30*time.Second)
	if first.ReceiveCount != 1 {
		t.Errorf("first delivery count %d", first.ReceiveCount)
	}
	clock.Advance(30*time.Second - time.Nanosecond)
	if ds, _ := q.Receive(ctx, 10, 0); len(ds) != 0 {
		t.Fatalf("redelivered before the visibility timeout: %+v", ds)
	}
	clock.Advance(time.Nanosecond)
	second := receiveOne(t, q, 0) // default visibility, 30 s
	if second.ID != first.ID || second.Receipt == first.Receipt || second.ReceiveCount != 2 {
		t.Errorf("redelivery %+v after %+v", second, first)
	}
	if err := q.Ack(ctx, first); !errors.Is(err, ErrInvalidReceipt) {
		t.Errorf("ack with a superseded receipt: %v, want ErrInvalidReceipt", err)
	}
	if err := q.Nack(ctx, second, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	third := receiveOne(t, q, time.Minute)
	if err := q.Ack(ctx, third); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(ctx, third); !errors.Is(err, ErrInvalidReceipt) {
		t.Errorf("second ack: %v, want ErrInvalidReceipt", err)
	}
	clock.Advance(time.Hour)
	if ds, _ := q.Receive(ctx, 10, 0); len(ds) != 0 || q.Len() != 0 {
		t.Errorf("acked message came back: %+v", ds)
	}
}

func TestEmbeddedDeadLetterAfterMaxReceives(t *testing.T) {
	ctx := context.Background()
	clock := newFakeNow()
	q := NewEmbedded(EmbeddedOptions{Clock: clock, MaxReceives: 3})
	if err := q.Send(ctx, bodies(2)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		ds, err := q.Receive(ctx, 10, time.Second)
		if err != nil || len(ds) != 2 || ds[0].ReceiveCount != i {
			t.Fatalf("receive %d: %+v %v", i, ds, err)
		}
		if i == 3 {
			if err := q.Ack(ctx, ds[1]); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(time.Second)
	}
	if ds, _ := q.Receive(ctx, 10, time.Second); len(ds) != 0 {
		t.Errorf("delivered beyond MaxReceives: %+v", ds)
	}
	dead := q.DeadLetters()
	if len(dead) != 1 || string(dead[0].Body) != `{"range":0}` || dead[0].ReceiveCount != 3 || q.Len() != 0 {
		t.Errorf("dead letters %+v, %d left", dead, q.Len())
	}
}

func TestEmbeddedRejectsWhatSQSWould(t *testing.T) {
	q := NewEmbedded(EmbeddedOptions{})
	ctx := context.Background()
	if err := q.Send(ctx, []Message{{Body: make([]byte, MaxMessageBytes+1)}}); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	for _, body := range []string{"\xff", "", "a\x00b", "\x1b[0m"} {
		if err := q.Send(ctx, []Message{{Body: []byte("ok")}, {Body: []byte(body)}}); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("body %q: %v, want ErrInvalidMessage", body, err)
		}
	}
	if err := q.Send(ctx, []Message{{Body: []byte("tab\tnl\ncr\r \u00e9\U0001F600")}}); err != nil {
		t.Errorf("valid text refused: %v", err)
	}
	q = NewEmbedded(EmbeddedOptions{})
	if q.Len() != 0 {
		t.Errorf("rejected sends enqueued %d messages", q.Len())
	}
}

func receiveOne(t *testing.T, q Queue, vis time.Duration) Delivery {
	t.Helper()
	ds, err := q.Receive(context.Background(), 10, vis)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %+v %v", ds, err)
	}
	return ds[0]
}

func TestDrain(t *testing.T) {
	ctx := context.Background()
	clock := newFakeNow()
	q := NewEmbedded(EmbeddedOptions{Clock: clock})
	msgs := []Message{{Body: []byte("ok")}, {Body: []byte("bad")}, {Body: []byte("flaky")}, {Body: []byte("ok")}}
	if err := q.Send(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	h := func(_ context.Context, body []byte) error {
		switch string(body) {
		case "bad":
			return fmt.Errorf("decode: %w", ErrPermanent)
		case "flaky":
			return errors.New("throttled")
		}
		return nil
	}
	var dead []string
	opts := DrainOptions{
		RetryDelay: 10 * time.Second, MaxReceives: 2, Logger: quiet,
		DeadLetter: func(_ context.Context, d Delivery, cause error) error {
			dead = append(dead, fmt.Sprintf("%s@%d", d.Body, d.ReceiveCount))
			return nil
		},
	}
	st, err := Drain(ctx, q, h, opts)
	if err != nil || st != (DrainStats{Received: 4, Succeeded: 2, Failed: 1, DeadLettered: 1}) {
		t.Fatalf("first drain: %+v %v", st, err)
	}
	clock.Advance(10 * time.Second) // RetryDelay, not the 30 s visibility
	st, err = Drain(ctx, q, h, opts)
	if err != nil || st != (DrainStats{Received: 1, DeadLettered: 1}) || q.Len() != 0 {
		t.Fatalf("second drain: %+v %v, %d left", st, err, q.Len())
	}
	if fmt.Sprint(dead) != "[bad@1 flaky@2]" {
		t.Errorf("dead-lettered %v", dead)
	}

	// A failing dead-letter sink leaves the message queued.
	if err := q.Send(ctx, []Message{{Body: []byte("bad")}}); err != nil {
		t.Fatal(err)
	}
	opts.DeadLetter = func(context.Context, Delivery, error) error { return errors.New("sink down") }
	if st, err := Drain(ctx, q, h, opts); err != nil || st.Failed != 1 || q.Len() != 1 {
		t.Errorf("drain with a failing sink: %+v %v, %d left", st, err, q.Len())
	}

	// Drain stops when ctx ends, leaving the rest queued.
	clock.Advance(time.Hour)
	cctx, cancel := context.WithCancel(ctx)
	n := 0
	st, err = Drain(cctx, q, func(context.Context, []byte) error { n++; cancel(); return nil }, DrainOptions{Logger: quiet})
	if !errors.Is(err, context.Canceled) || n != 1 || st.Succeeded != 1 || q.Len() != 0 {
		t.Errorf("cancelled drain: %+v %v after %d handled, %d left", st, err, n, q.Len())
	}
}

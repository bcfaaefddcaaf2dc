package awsfn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// getLatencyStore advances a fake clock by a latency per GET: the
// invocation's time is spent only by requests, deterministically.
type getLatencyStore struct {
	objstore.Store
	clock *fakeclock.Clock
	get   time.Duration
}

func (s *getLatencyStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.clock.Advance(s.get)
	return s.Store.Get(ctx, key)
}

type bodySink struct{ b [][]byte }

// sendLog records what is sent through a queue.
type sendLog struct {
	queue.Queue
	mu   sync.Mutex
	sent [][]byte
}

func (s *sendLog) Send(ctx context.Context, msgs []queue.Message) error {
	s.mu.Lock()
	for _, m := range msgs {
		s.sent = append(s.sent, m.Body)
	}
	s.mu.Unlock()
	return s.Queue.Send(ctx, msgs)
}

func (s *bodySink) Send(_ context.Context, bs [][]byte) error {
	s.b = append(s.b, bs...)
	return nil
}

// sqsEvent is the event Lambda passes for deliveries ds.
func sqsEvent(t *testing.T, ds []queue.Delivery) json.RawMessage {
	t.Helper()
	ev := events.SQSEvent{}
	for _, d := range ds {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: d.ID, ReceiptHandle: d.Receipt, Body: string(d.Body), EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:cleanup", AWSRegion: "us-east-1",
			Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(d.ReceiveCount)},
		})
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestCleanerFitsDeadline: a batch whose invocation has time (at 20 ms per
// GET, on a fake clock) for only part of its first 1,000-version range:
// that range continues in a new message, the messages not started are sent
// back unchanged, nothing is reported failed (so no receive count grows
// towards the DLQ: every message on the queue afterwards is a first
// delivery), and the next invocations finish the job.
func TestCleanerFitsDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1,000 versions")
	}
	ctx := context.Background()
	disk, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := fakeclock.New(time.Now())
	opts := table.Options{Format: 2, Clock: fakeclock.NoSleep(clk)}
	const prefix, rel, name = "wh", "tables/t", "t"
	cat, err := catalog.Open(ctx, disk, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := table.Create(ctx, disk, prefix+"/"+rel, registrySchema, "name", opts)
	if err != nil {
		t.Fatal(err)
	}
	pol := maintenance.Policy{KeepLast: 3, Grace: time.Hour, RangeVersions: 1000}
	if err := cat.Register(ctx, name, rel, pol); err != nil {
		t.Fatal(err)
	}
	for i := range 1005 {
		rec := row(fmt.Sprint("store-", i%20), fmt.Sprint("v", i))
		if _, err := tb.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	model := rows(t, tb)
	clk.Advance(2 * time.Hour)
	plan, err := maintenance.PlanPrune(ctx, tb, name, pol, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	sink := &bodySink{}
	if err := maintenance.ApplyPrune(ctx, tb, &plan, sink); err != nil {
		t.Fatal(err)
	}
	if len(sink.b) != 2 {
		t.Fatalf("%d ranges, want 2", len(sink.b))
	}
	q := queue.NewEmbedded(queue.EmbeddedOptions{Clock: clk})
	// A batch of 5: the 1,000-version range first, then the other range and
	// three duplicates (at-least-once delivery).
	big := sink.b[0]
	if m, _ := maintenance.DecodeRangeMessage(big); m.To-m.From+1 < 900 {
		big = sink.b[1]
	}
	batch := [][]byte{big, sink.b[0], sink.b[1], big, big}
	msgs := make([]queue.Message, len(batch))
	for i, b := range batch {
		msgs[i] = queue.Message{Body: b}
	}
	if err := q.Send(ctx, msgs); err != nil {
		t.Fatal(err)
	}

	const margin = 30 * time.Second
	sent := &sendLog{Queue: q}
	d := &awsfn.Deps{
		Config: awsfn.Config{Margin: margin},
		Logger: slog.New(slog.DiscardHandler), Clock: clk,
		Store: &getLatencyStore{Store: disk, clock: clk, get: 20 * time.Millisecond},
		Root:  prefix, Queue: sent, Metrics: io.Discard,
	}
	// invoke runs one invocation on up to 10 messages, with time for
	// budget of GETs before StopBy (real time is not spent: the fake clock
	// runs ahead of it by a fixed offset).
	invoke := func(budget time.Duration) (events.SQSEventResponse, int) {
		ds, err := q.Receive(ctx, 10, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return events.SQSEventResponse{}, 0
		}
		for _, dl := range ds {
			if dl.ReceiveCount != 1 {
				t.Fatalf("message %s delivered %d times: a receive count grew", dl.ID, dl.ReceiveCount)
			}
		}
		d.Config.ClockOffset = clk.Now().Sub(time.Now())
		ictx, cancel := context.WithDeadline(ctx, time.Now().Add(margin+budget))
		defer cancel()
		resp, err := d.Clean(ictx, sqsEvent(t, ds))
		if err != nil {
			t.Fatal(err)
		}
		// Lambda deletes what is not listed.
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, dl := range ds {
			if !failed[dl.ID] {
				if err := q.Ack(ctx, dl); err != nil {
					t.Fatal(err)
				}
			}
		}
		return resp, len(ds)
	}

	// 6 s of GETs at 20 ms: ~300 of the first range's 1,000 change records.
	resp, n := invoke(6 * time.Second)
	if n != len(batch) || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("first invocation: %d messages, failures %+v; want none reported", n, resp.BatchItemFailures)
	}
	// Two messages run at once (CleanerMessagesInFlight): the 1,000-version
	// range and whichever came next were started; the started big ranges
	// continue part-way, the rest went back unchanged.
	back := sent.sent
	sent.sent = nil
	var conts, same int
	for _, b := range back {
		m, err := maintenance.DecodeRangeMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.Cursor > m.From && m.Cursor < m.To:
			conts++
		case m.Cursor == 0 && slices.ContainsFunc(batch, func(x []byte) bool { return string(x) == string(b) }):
			same++
		default:
			t.Fatalf("sent %s", b)
		}
	}
	if conts < 1 || same < len(batch)-awsfn.CleanerMessagesInFlight || conts+same > len(batch) {
		t.Fatalf("queue after the first invocation: %d continuations, %d unchanged; want >= 1 and >= %d of %d", conts, same, len(batch)-awsfn.CleanerMessagesInFlight, len(batch))
	}
	if vs, _ := tb.Versions(ctx); len(vs) < 1000 {
		t.Fatalf("%d versions after a partial range: manifests deleted before the range was finished", len(vs))
	}

	// Later invocations, each with 6 s, finish the job; none fails.
	for i := 0; ; i++ {
		if i > 20 {
			t.Fatal("queue not drained after 20 invocations")
		}
		resp, n := invoke(6 * time.Second)
		if n == 0 {
			break
		}
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("invocation %d: failures %+v", i, resp.BatchItemFailures)
		}
	}
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 {
		t.Fatalf("%d versions left, want 3", len(vs))
	}
	if got := rows(t, tb); !sameRows(got, model) {
		t.Fatalf("rows changed by cleanup")
	}
}

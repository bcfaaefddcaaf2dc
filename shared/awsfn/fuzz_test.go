package awsfn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Events of other kinds Lambda may hand a function: API Gateway (REST and
// HTTP), S3, SNS, a direct invocation with a string or an array.
var fuzzForeignEvents = []string{
	`{"resource":"/","path":"/","httpMethod":"POST","headers":{},"requestContext":{"stage":"prod"},"body":"{\"v\":1}","isBase64Encoded":false}`,
	`{"version":"2.0","routeKey":"$default","rawPath":"/","headers":{},"requestContext":{"http":{"method":"GET"}},"isBase64Encoded":false}`,
	`{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`,
	`{"Records":[{"EventSource":"aws:sns","Sns":{"Message":"x"}}]}`,
	`{"Records":[{"messageId":"1","eventSource":"aws:sqs","body":"x"}],"source":"aws.events","detail-type":"Scheduled Event"}`,
	`{"Records":[]}`, `{"Records":null}`, `{"Records":{}}`, `{"source":["aws.events"]}`, `{"detail-type":"Scheduled Event"}`,
	`"hello"`, `[]`, `null`, `{}`, ``, `{`, `{"source":"aws.events","detail-type":"Scheduled Event"}{}`,
	`{"Records":[{"messageId":"1","eventSource":"aws:sqs","body":"` + strings.Repeat("A", 300<<10) + `"}]}`,
	`{"Records":[{"messageId":"1","eventSource":"aws:sqs","body":"{\"v\":1,\"table\":\"registry\",\"root\":\"warehouse/tables/registry/../../x/\",\"from\":1,\"to\":3}"}]}`,
	`{"Records":[{"messageId":"1","eventSource":"aws:sqs","body":"{\"v\":1,\"table\":\"registry\",\"root\":\"/etc/\",\"from\":1,\"to\":18446744073709551615}"}]}`,
}

// fuzzEventSeeds adds every file of events/ and the foreign events.
func fuzzEventSeeds(f *testing.F) {
	files, err := filepath.Glob("../../events/*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no events/*.json: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range fuzzForeignEvents {
		f.Add([]byte(s))
	}
}

// FuzzParseScheduled: never panics; a rejection wraps ErrUnsupportedEvent
// and names the function; an accepted event is an EventBridge or Scheduler
// "Scheduled Event" and is not also accepted as an SQS batch.
func FuzzParseScheduled(f *testing.F) {
	fuzzEventSeeds(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := ParseScheduled(RoleCompactor, raw)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedEvent) || !strings.HasPrefix(err.Error(), "compactor: ") {
				t.Fatalf("error %q does not wrap ErrUnsupportedEvent or name the function", err)
			}
			return
		}
		if (ev.Source != SourceEventBridge && ev.Source != SourceScheduler) || ev.DetailType != "Scheduled Event" {
			t.Fatalf("accepted %+v", ev)
		}
		if _, err := ParseSQS(RoleCleaner, raw); err == nil {
			t.Fatalf("%.300q is accepted both as a scheduled event and as an SQS batch", raw)
		}
	})
}

// FuzzParseSQS: never panics; a rejection wraps ErrUnsupportedEvent and
// names the function; an accepted batch has records, all from aws:sqs, and
// is not also accepted as a scheduled event.
func FuzzParseSQS(f *testing.F) {
	fuzzEventSeeds(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := ParseSQS(RoleCleaner, raw)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedEvent) || !strings.HasPrefix(err.Error(), "cleaner: ") {
				t.Fatalf("error %q does not wrap ErrUnsupportedEvent or name the function", err)
			}
			return
		}
		if len(ev.Records) == 0 {
			t.Fatal("accepted an empty batch")
		}
		for _, r := range ev.Records {
			if r.EventSource != "aws:sqs" {
				t.Fatalf("accepted a record from %q", r.EventSource)
			}
		}
		if _, err := ParseScheduled(RoleCompactor, raw); err == nil {
			t.Fatalf("%.300q is accepted both as an SQS batch and as a scheduled event", raw)
		}
	})
}

// FuzzCleanEvent runs the cleaner's whole handler (event check, body
// decoding, table resolution, range checks) on a warehouse on disk holding
// events/sqs-cleanup.json's table with nothing below its floor, so no body
// may delete anything: the handler never panics, fails the invocation only
// for an unsupported event, never reports a message for retry (every
// rejection is permanent), and the warehouse listing is unchanged.
func FuzzCleanEvent(f *testing.F) {
	fuzzEventSeeds(f)
	d, before := fuzzCleanerDeps(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := d.Clean(ctx, raw)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedEvent) {
				t.Fatalf("invocation failed with %v, want only unsupported events to fail it", err)
			}
			return
		}
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%.300q: %d messages reported for retry; every bad body is permanent", raw, len(resp.BatchItemFailures))
		}
		if got := fuzzListing(t, d.Store); got != before {
			t.Fatalf("%.300q changed the warehouse:\n%s\nwas\n%s", raw, got, before)
		}
	})
}

func fuzzCleanerDeps(f *testing.F) (*Deps, string) {
	ctx := context.Background()
	disk, err := objstore.NewDisk(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	const root = "warehouse"
	cat, err := catalog.Open(ctx, disk, root, table.Options{})
	if err != nil {
		f.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}, {Name: "uri", Type: arrow.BinaryTypes.String}}, nil)
	tb, err := table.Create(ctx, disk, root+"/tables/registry", schema, "name", table.Options{Format: 2})
	if err != nil {
		f.Fatal(err)
	}
	if err := cat.Register(ctx, "registry", "tables/registry", maintenance.Policy{KeepLast: 5, Grace: time.Hour}); err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.StringBuilder).Append("k")
		b.Field(1).(*array.StringBuilder).Append(strings.Repeat("v", i+1))
		rec := b.NewRecordBatch()
		b.Release()
		if _, err := tb.Upsert(ctx, rec); err != nil {
			f.Fatal(err)
		}
	}
	d := &Deps{
		Config: Config{Role: RoleCleaner, Warehouse: "s3://fuzz/" + root, Margin: time.Second},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Clock: lock.AheadClock{Clock: clock.System(), Ahead: 2 * time.Hour},
		Store: disk, Root: root, Queue: queue.NewEmbedded(queue.EmbeddedOptions{}), Metrics: io.Discard,
	}
	return d, fuzzListing(f, disk)
}

func fuzzListing(t testing.TB, st objstore.Store) string {
	var keys []string
	if err := objstore.ListAll(context.Background(), st, "", "", func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}

// fuzzClock reads the system clock 2h ahead (past the 1h grace), like the
// handlers' TEST-ONLY clock offset.
type fuzzClock struct{ off time.Duration }

func (c fuzzClock) Now() time.Time { return time.Now().Add(c.off) }
func (c fuzzClock) Sleep(ctx context.Context, d time.Duration) error {
	return clock.System().Sleep(ctx, d)
}

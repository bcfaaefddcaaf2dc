package awsfn_test

import (
	"errors"
	"testing"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	fleetpkg "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// FuzzCompactionQueueBody: whatever arrives on the compaction queue, the
// parsers never panic; every rejection is permanent (dropped, never
// retried), and an accepted job names this warehouse, a table and a sane
// attempt.
func FuzzCompactionQueueBody(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"warehouse":"s3://b/w","table":"t","attempt":0}`,
		`{"v":1,"warehouse":"s3://b/w","table":"t","attempt":3,"not_before":"2026-01-01T00:00:00Z","reason":"retry"}`,
		`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"w/t/_versions/00000000000000000001.manifest"}}}]}`,
		`{"source":"aws.s3","detail-type":"Object Created","detail":{"bucket":{"name":"b"},"object":{"key":"k"}}}`,
		`{"Service":"Amazon S3","Event":"s3:TestEvent"}`,
		`{"v":1,"table":"t","root":"w/","from":1,"to":2}`,
		``, `null`, `[]`, `{"Records":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		keys, isNote, err := awsfn.ParseNotification(body)
		if err != nil && !errors.Is(err, queue.ErrPermanent) {
			t.Fatalf("notification error not permanent: %v", err)
		}
		if !isNote && (len(keys) > 0 || err != nil) {
			t.Fatalf("not a notification, yet keys %v err %v", keys, err)
		}
		j, err := awsfn.ParseJob(body, "s3://b/w")
		if err != nil {
			if !errors.Is(err, queue.ErrPermanent) || !errors.Is(err, awsfn.ErrInvalidJob) {
				t.Fatalf("job error not permanent: %v", err)
			}
			return
		}
		if j.Warehouse != "s3://b/w" || j.Table == "" || j.Attempt < 0 || j.V != fleetpkg.JobVersion {
			t.Fatalf("accepted %+v", j)
		}
	})
}

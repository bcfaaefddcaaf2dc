package objstore

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// stallingHTTP answers the first attempt with a retryable 500 and holds
// every later one until its request's context ends, as a server that
// stopped answering; it records each attempt.
type stallingHTTP struct {
	mu       sync.Mutex
	attempts []attempt
}

type attempt struct {
	start       time.Time
	deadline    time.Time
	hasDeadline bool
	doneAtStart bool
}

func (h *stallingHTTP) Do(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	dl, ok := ctx.Deadline()
	h.mu.Lock()
	h.attempts = append(h.attempts, attempt{time.Now(), dl, ok, ctx.Err() != nil})
	n := len(h.attempts)
	h.mu.Unlock()
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	if n == 1 {
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>retry me</Message></Error>`
		return &http.Response{StatusCode: 500, Status: "500 Internal Server Error", Header: http.Header{"Content-Type": {"application/xml"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *stallingHTTP) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.attempts)
}

// TestS3CallBoundedByDeadline (issue 19 item 8): with the retryer the S3
// store uses, every attempt of a PutIfAbsent (the manifest write) runs
// under the call's deadline, none starts after it, the call returns once
// it passes, and nothing is sent after the call returned. This is what
// lets table.ManifestPutTimeout bound a manifest write end to end: no byte
// of it leaves the client later.
func TestS3CallBoundedByDeadline(t *testing.T) {
	h := &stallingHTTP{}
	client := s3.New(s3.Options{
		Region: "us-east-1", Credentials: aws.AnonymousCredentials{}, BaseEndpoint: aws.String("http://s3.invalid"),
		UsePathStyle: true, HTTPClient: h, Retryer: s3Retryer(DefaultS3MaxAttempts),
	})
	st := NewS3(client, "b")
	const budget = 2500 * time.Millisecond // > the first retry's backoff (at most 2 s)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := st.PutIfAbsent(ctx, "t/_versions/18446744073709551613.manifest", []byte("manifest"))
	returned := time.Now()
	if err == nil || errors.Is(err, ErrExists) {
		t.Fatalf("put on a stalled server: %v, want an unknown outcome", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("error: %v", err)
	}
	if returned.Before(deadline) && h.count() > 1 {
		t.Fatalf("returned %s before the deadline with an attempt held", deadline.Sub(returned))
	}
	n := h.count()
	if n < 2 {
		t.Fatalf("%d attempts: the retry never ran", n)
	}
	time.Sleep(100 * time.Millisecond)
	if h.count() != n {
		t.Fatalf("%d attempts after the call returned, %d before", h.count(), n)
	}
	for i, a := range h.attempts {
		if !a.hasDeadline || !a.deadline.Equal(deadline) {
			t.Errorf("attempt %d: deadline %v (set %v), want the call's %v", i+1, a.deadline, a.hasDeadline, deadline)
		}
		if a.start.After(deadline) && !a.doneAtStart {
			t.Errorf("attempt %d started %s after the deadline on a live context", i+1, a.start.Sub(deadline))
		}
	}
}

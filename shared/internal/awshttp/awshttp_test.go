package awshttp

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

type recorder struct {
	body   string
	closed bool
}

type closeTracker struct {
	io.Reader
	r *recorder
}

func (c closeTracker) Close() error { c.r.closed = true; return nil }

type sink struct{ got *string }

func (s sink) Do(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	*s.got = string(b)
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// The transport gets a copy it owns: closing the caller's body afterwards
// (as smithy-go does when Do returns) cannot cut a write short.
func TestPrivateBodies(t *testing.T) {
	var got string
	rec := &recorder{}
	req, _ := http.NewRequest("POST", "http://127.0.0.1/", closeTracker{strings.NewReader(`{"a":1}`), rec})
	req.ContentLength = 7
	if _, err := PrivateBodies(sink{&got}).Do(req); err != nil {
		t.Fatal(err)
	}
	if got != `{"a":1}` || !rec.closed {
		t.Errorf("sent %q, caller's body closed %v", got, rec.closed)
	}
	// Unknown length or a huge body passes through untouched.
	req, _ = http.NewRequest("POST", "http://127.0.0.1/", io.NopCloser(strings.NewReader("x")))
	req.ContentLength = -1
	if _, err := PrivateBodies(sink{&got}).Do(req); err != nil || got != "x" {
		t.Errorf("pass-through: %q %v", got, err)
	}
}

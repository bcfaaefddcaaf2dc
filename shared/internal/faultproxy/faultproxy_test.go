package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func start(t *testing.T, opts faultproxy.Options) (*faultproxy.Proxy, *objstore.S3) {
	t.Helper()
	direct := testenv.S3Store(t)
	p, err := faultproxy.Start(testenv.S3Endpoint(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	st, err := faultproxy.NewS3(context.Background(), p.URL(), direct.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	return p, st
}

// TestRetriedFaults: every retryable fault, before or after the server
// applied the request, is absorbed by the SDK retryer, and objstore.S3 keeps
// its semantics (a PutIfAbsent whose first attempt was applied but whose
// response was lost still reports success; a second one reports ErrExists).
func TestRetriedFaults(t *testing.T) {
	ctx := context.Background()
	for _, f := range []faultproxy.Fault{faultproxy.InternalError, faultproxy.SlowDown, faultproxy.Timeout, faultproxy.Reset} {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-after=%v", f, after), func(t *testing.T) {
				// Every other request fails: each call succeeds on its second attempt.
				p, st := start(t, faultproxy.Options{Rules: []faultproxy.Rule{{Fault: f, Every: 2, After: after}}})
				data := []byte("hello")
				// Request 1 passes, so the first PutIfAbsent (request 2) is faulted.
				if _, err := st.Head(ctx, "a/none"); !errors.Is(err, objstore.ErrNotExist) {
					t.Fatalf("head: %v", err)
				}
				if err := st.PutIfAbsent(ctx, "a/k", data); err != nil {
					t.Fatalf("put-if-absent: %v", err)
				}
				if err := st.PutIfAbsent(ctx, "a/k", []byte("other")); !errors.Is(err, objstore.ErrExists) {
					t.Fatalf("second put-if-absent: %v, want ErrExists", err)
				}
				if err := st.Put(ctx, "a/p", data); err != nil {
					t.Fatalf("put: %v", err)
				}
				for _, k := range []string{"a/k", "a/p"} {
					got, err := st.Get(ctx, k)
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("get %s: %q %v", k, got, err)
					}
				}
				if err := st.Delete(ctx, []string{"a/k", "a/p"}); err != nil {
					t.Fatalf("delete: %v", err)
				}
				if _, err := st.Head(ctx, "a/k"); !errors.Is(err, objstore.ErrNotExist) {
					t.Fatalf("head after delete: %v", err)
				}
				s := p.Stats()
				if s.Total() == 0 {
					t.Fatalf("no fault injected: %v", s)
				}
				t.Log(s)
			})
		}
	}
}

// TestConditionalFaults: 412 and 409 on conditional PUTs are ErrExists;
// plain PUTs are not matched.
func TestConditionalFaults(t *testing.T) {
	ctx := context.Background()
	for _, f := range []faultproxy.Fault{faultproxy.PreconditionFailed, faultproxy.ConditionConflict} {
		p, st := start(t, faultproxy.Options{Rules: []faultproxy.Rule{{Fault: f, Match: faultproxy.IsConditionalPut, Prob: 1}}})
		if err := st.PutIfAbsent(ctx, "c/k", []byte("x")); !errors.Is(err, objstore.ErrExists) {
			t.Fatalf("%s: put-if-absent: %v, want ErrExists", f, err)
		}
		if _, err := st.Head(ctx, "c/k"); !errors.Is(err, objstore.ErrNotExist) {
			t.Fatalf("%s: injected before the server, yet the key exists: %v", f, err)
		}
		if err := st.Put(ctx, "c/p", []byte("x")); err != nil {
			t.Fatalf("%s: plain put: %v", f, err)
		}
		if s := p.Stats(); s.Total() != 1 {
			t.Fatalf("%s: %v, want exactly one fault", f, s)
		}
	}
}

// TestDeterministic: the same seed faults the same requests.
func TestDeterministic(t *testing.T) {
	ctx := context.Background()
	run := func() string {
		p, st := start(t, faultproxy.Options{Seed: 7, Rules: []faultproxy.Rule{{Fault: faultproxy.SlowDown, Prob: 0.3}}})
		for i := range 20 {
			if err := st.Put(ctx, fmt.Sprintf("d/%d", i), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		return p.Stats().String()
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("same seed, different faults: %s vs %s", a, b)
	}
}

// TestNth: a rule fires on the matching requests listed in Nth whatever
// Prob draws (here never), counted per rule; a request faulted by an
// earlier rule is not seen by later ones, so rules with Nth {1} fault
// consecutive requests in rule order.
func TestNth(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	t.Cleanup(backend.Close)
	get := func(p *faultproxy.Proxy, path string) int {
		t.Helper()
		resp, err := http.Get(p.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	isX := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/x") }
	p, err := faultproxy.Start(backend.URL, faultproxy.Options{Seed: 1, Rules: []faultproxy.Rule{
		{Fault: faultproxy.InternalError, Match: isX, Nth: []int{2, 4}},
		{Fault: faultproxy.SlowDown, Match: isX, Nth: []int{1}, After: true},
		{Fault: faultproxy.SlowDown, Match: isX, Nth: []int{2}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var got []int
	for i := range 6 {
		got = append(got, get(p, "/y"))                   // never matched
		got = append(got, get(p, fmt.Sprintf("/x%d", i))) // rule 0 sees all six
	}
	// x0: rule 1 (its 1st); x1: rule 0 (its 2nd); x2: none (rule 2 sees
	// its 1st); x3: rule 0 (4th); x4: rule 2 (its 2nd); x5: none.
	want := []int{200, 503, 200, 500, 200, 200, 200, 500, 200, 503, 200, 200}
	if !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	s := p.Stats()
	if s.Requests != 12 || s.Injected["500"] != 2 || s.Injected["503-slowdown-after"] != 1 || s.Injected["503-slowdown"] != 1 || s.Total() != 4 {
		t.Fatalf("%v", s)
	}
	// SetRules restarts the counts.
	p.SetRules([]faultproxy.Rule{{Fault: faultproxy.InternalError, Nth: []int{1}}})
	if a, b := get(p, "/x"), get(p, "/x"); a != 500 || b != 200 {
		t.Fatalf("after SetRules: %d %d, want 500 200", a, b)
	}
}

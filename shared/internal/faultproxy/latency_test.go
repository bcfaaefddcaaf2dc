package faultproxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// recorder is a clock.Clock that records the delays instead of waiting.
type recorder struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (r *recorder) Now() time.Time { return time.Now() }

func (r *recorder) Sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.delays = append(r.delays, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *recorder) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.delays
	r.delays = nil
	return out
}

// TestLatency: each S3 request is delayed by its kind's latency in the
// profile before it is forwarded; JSON protocol requests are not; the
// profile can be changed while running. The backend is a stub, so no
// stack is needed, and the delays are recorded, not slept.
func TestLatency(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	defer backend.Close()
	rec := &recorder{}
	p, err := faultproxy.Start(backend.URL, faultproxy.Options{Latency: objstore.S3Profile(), Clock: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ms := time.Millisecond
	send := func(method, path string, hdr map[string]string) {
		t.Helper()
		req, err := http.NewRequest(method, p.URL()+path, strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s", method, path, resp.Status)
		}
	}
	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
		kind         objstore.Kind
		want         time.Duration
	}{
		{"GET", "/bucket/k", nil, objstore.KindGet, 20 * ms},
		{"HEAD", "/bucket/k", nil, objstore.KindHead, 20 * ms},
		{"GET", "/bucket?list-type=2&prefix=a", nil, objstore.KindList, 40 * ms},
		{"PUT", "/bucket/k", map[string]string{"If-None-Match": "*"}, objstore.KindPut, 30 * ms},
		{"POST", "/bucket?delete", nil, objstore.KindDelete, 120 * ms},
		{"DELETE", "/bucket/k", nil, objstore.KindDelete, 120 * ms},
		{"POST", "/", map[string]string{"X-Amz-Target": "DynamoDB_20120810.UpdateItem"}, "", 0},
	} {
		send(tc.method, tc.path, tc.hdr)
		var want []time.Duration
		if tc.want > 0 {
			want = []time.Duration{tc.want}
		}
		if got := rec.take(); len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
			t.Errorf("%s %s: delays %v, want %v", tc.method, tc.path, got, want)
		}
	}
	st := p.Stats()
	for k, n := range map[string]int{"GET": 1, "HEAD": 1, "LIST": 1, "PUT": 1, "DELETE": 2, "other": 1} {
		if st.ByKind[k] != n {
			t.Errorf("ByKind[%s] = %d, want %d (%v)", k, st.ByKind[k], n, st.ByKind)
		}
	}
	p.SetLatency(objstore.Profile{})
	send("GET", "/bucket/k", nil)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("no latency: delays %v", got)
	}

	// Real time, a short custom profile: a GET takes at least its latency
	// (a lower bound only; the upper one depends on the machine's load).
	custom, err := objstore.ParseProfile("get=15ms")
	if err != nil {
		t.Fatal(err)
	}
	slow, err := faultproxy.Start(backend.URL, faultproxy.Options{Latency: custom})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	t0 := time.Now()
	resp, err := http.Get(slow.URL() + "/bucket/k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(t0); d < 15*ms {
		t.Errorf("GET through a 15ms profile took %s", d)
	}
}

// TestLatencyS3: through the proxy, the S3 client's requests are classified
// and delayed by kind (local stack).
func TestLatencyS3(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	p, st := start(t, faultproxy.Options{Latency: objstore.S3Profile(), Clock: rec})
	if err := st.Put(ctx, "lat/k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "lat/k"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.List(ctx, objstore.ListOptions{Prefix: "lat/"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, []string{"lat/k"}); err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := []time.Duration{30 * ms, 20 * ms, 40 * ms, 120 * ms}
	got := rec.take()
	if len(got) != len(want) {
		t.Fatalf("delays %v, want %v (%v)", got, want, p.Stats().ByKind)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delays %v, want %v", got, want)
			break
		}
	}
}

package faultproxy

import (
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Fault is one kind of injected failure.
type Fault int

const (
	InternalError      Fault = iota + 1 // 500 InternalError
	SlowDown                            // 503 SlowDown
	Timeout                             // hold the connection for Hold, then close it without a response
	Reset                               // close the connection with a TCP RST
	PreconditionFailed                  // 412 PreconditionFailed
	ConditionConflict                   // 409 ConditionalRequestConflict
	// ConditionalCheckFailed is DynamoDB's 400 ConditionalCheckFailedException
	// (without the item); with Rule.After, a conditional write that was
	// applied is reported as having failed its condition.
	ConditionalCheckFailed
)

func (f Fault) String() string {
	switch f {
	case InternalError:
		return "500"
	case SlowDown:
		return "503-slowdown"
	case Timeout:
		return "timeout"
	case Reset:
		return "reset"
	case PreconditionFailed:
		return "412"
	case ConditionConflict:
		return "409"
	case ConditionalCheckFailed:
		return "ccf"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Rule injects Fault into requests Match accepts (nil: all requests).
type Rule struct {
	Fault Fault
	Match func(*http.Request) bool
	// Prob is the chance that a matching request gets the fault.
	Prob float64
	// Every, if positive, faults every Every-th matching request (counted
	// per rule) instead of by probability.
	Every int
	// Nth lists matching requests (1-based, counted per rule like Every)
	// that get the fault in any case, in addition to those Prob or Every
	// pick: the rule is certain to have fired once it has matched
	// max(Nth) requests. Prob is drawn for them too, so adding Nth does
	// not shift the random choices of other requests of this rule.
	// Rules are tried in order and a request takes the first fault that
	// fires: later rules do not see (or count) it.
	Nth []int
	// After forwards the request first and injects the fault instead of
	// the server's response (the server has applied the request).
	After bool
	// Hold is how long Timeout holds the connection (default 300 ms).
	Hold time.Duration
}

// Options configure a Proxy.
type Options struct {
	Seed  uint64
	Rules []Rule
	// Latency delays each S3 request by Latency.For(S3Kind(request))
	// before it is forwarded or faulted (zero: no delay). For example
	// objstore.S3Profile(), or objstore.ParseProfile("get=20ms,put=30ms").
	Latency objstore.Profile
	// Delay, if set, is used instead of Latency: the delay of each request
	// (JSON protocol requests included), 0 for none.
	Delay func(*http.Request) time.Duration
	// Clock waits out a delay (nil: the real clock, a timer cut short when
	// the client goes away). Tests may record the delays instead.
	Clock clock.Clock
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	target *url.URL
	ln     net.Listener
	srv    *http.Server
	tr     *http.Transport

	clock clock.Clock

	mu       sync.Mutex
	latency  objstore.Profile
	delay    func(*http.Request) time.Duration
	byKind   map[string]int
	rng      *rand.Rand
	rules    []Rule
	matched  []int
	enabled  bool
	requests int
	injected map[string]int
}

// Start listens on a free loopback port and forwards to target (for
// example http://127.0.0.1:7070). Close stops it.
func Start(target string, opts Options) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: bad target %q: %v", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		target:   u,
		ln:       ln,
		tr:       &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
		rng:      rand.New(rand.NewPCG(opts.Seed, 0x5eed)),
		enabled:  true,
		injected: map[string]int{},
		byKind:   map[string]int{},
		clock:    clock.Or(opts.Clock),
		latency:  opts.Latency,
		delay:    opts.Delay,
	}
	p.SetRules(opts.Rules)
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's endpoint, to use as the S3 endpoint.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	return err
}

// SetRules replaces the rules (counters of Every and Nth restart).
func (p *Proxy) SetRules(rules []Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append([]Rule(nil), rules...)
	for i := range p.rules {
		p.rules[i].Nth = slices.Clone(p.rules[i].Nth)
	}
	p.matched = make([]int, len(rules))
}

// SetLatency replaces the latency profile (Options.Latency) and clears
// Options.Delay.
func (p *Proxy) SetLatency(profile objstore.Profile) {
	p.mu.Lock()
	p.latency, p.delay = profile, nil
	p.mu.Unlock()
}

// Enable turns injection on or off (requests are always forwarded).
func (p *Proxy) Enable(on bool) {
	p.mu.Lock()
	p.enabled = on
	p.mu.Unlock()
}

// Stats is what the proxy has seen and injected.
type Stats struct {
	Requests int
	Injected map[string]int // by "fault" or "fault-after"
	// ByKind counts S3 requests by objstore.Kind ("GET", "LIST", ...);
	// requests that are not S3 requests count under "other".
	ByKind map[string]int
}

// Total is the number of injected faults.
func (s Stats) Total() int {
	n := 0
	for _, v := range s.Injected {
		n += v
	}
	return n
}

func (s Stats) String() string {
	keys := make([]string, 0, len(s.Injected))
	for k := range s.Injected {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, s.Injected[k])
	}
	return fmt.Sprintf("%d requests, %d faults (%s)", s.Requests, s.Total(), strings.Join(parts, " "))
}

// Stats returns a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Requests: p.requests, Injected: map[string]int{}, ByKind: map[string]int{}}
	for k, v := range p.injected {
		s.Injected[k] = v
	}
	for k, v := range p.byKind {
		s.ByKind[k] = v
	}
	return s
}

// IsConditionalPut matches PUTs with If-None-Match or If-Match (commits).
func IsConditionalPut(r *http.Request) bool {
	return r.Method == http.MethodPut && (r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Match") != "")
}

// IsDelete matches DeleteObjects (POST ?delete) and DeleteObject.
func IsDelete(r *http.Request) bool {
	return r.Method == http.MethodDelete || (r.Method == http.MethodPost && r.URL.Query().Has("delete"))
}

// IsList matches ListObjectsV2 (GET on the bucket with list-type=2).
func IsList(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2"
}

// S3Kind classifies an S3 request by objstore.Kind: HEAD; GET with
// list-type=2 is LIST, other GETs GET; PUT (and multipart POSTs) PUT;
// DeleteObjects and DeleteObject DELETE. AWS JSON protocol requests
// (X-Amz-Target: DynamoDB, SQS) and anything else are "".
func S3Kind(r *http.Request) objstore.Kind {
	if r.Header.Get("X-Amz-Target") != "" {
		return ""
	}
	switch {
	case r.Method == http.MethodHead:
		return objstore.KindHead
	case IsList(r):
		return objstore.KindList
	case r.Method == http.MethodGet:
		return objstore.KindGet
	case IsDelete(r):
		return objstore.KindDelete
	case r.Method == http.MethodPut, r.Method == http.MethodPost && (r.URL.Query().Has("uploads") || r.URL.Query().Has("uploadId")):
		return objstore.KindPut
	}
	return ""
}

// pick decides the fault for one request (nil: none) and its delay.
func (p *Proxy) pick(r *http.Request) (*Rule, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	kind := S3Kind(r)
	if kind == "" {
		p.byKind["other"]++
	} else {
		p.byKind[string(kind)]++
	}
	var delay time.Duration
	if p.delay != nil {
		delay = p.delay(r)
	} else if kind != "" {
		delay = p.latency.For(kind)
	}
	return p.pickFault(r), delay
}

func (p *Proxy) pickFault(r *http.Request) *Rule {
	if !p.enabled {
		return nil
	}
	for i := range p.rules {
		rule := &p.rules[i]
		if rule.Match != nil && !rule.Match(r) {
			continue
		}
		p.matched[i]++
		hit := false
		if rule.Every > 0 {
			hit = p.matched[i]%rule.Every == 0
		} else {
			hit = p.rng.Float64() < rule.Prob
		}
		hit = hit || slices.Contains(rule.Nth, p.matched[i])
		if hit {
			name := rule.Fault.String()
			if rule.After {
				name += "-after"
			}
			p.injected[name]++
			rc := *rule
			return &rc
		}
	}
	return nil
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rule, delay := p.pick(r)
	if delay > 0 {
		if err := p.clock.Sleep(r.Context(), delay); err != nil {
			return // the client went away
		}
	}
	if rule != nil && !rule.After {
		// The body is read so that the client is not stuck sending it.
		io.Copy(io.Discard, r.Body)
		p.inject(w, r, rule)
		return
	}
	resp, err := p.forward(r)
	if err != nil {
		http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if rule != nil {
		io.Copy(io.Discard, resp.Body)
		p.inject(w, r, rule)
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *Proxy) forward(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.URL.Scheme = p.target.Scheme
	out.URL.Host = p.target.Host
	out.RequestURI = ""
	out.Host = r.Host // signed by the client
	out.Header.Del("Connection")
	if r.ContentLength == 0 {
		out.Body = nil
	}
	return p.tr.RoundTrip(out)
}

func (p *Proxy) inject(w http.ResponseWriter, r *http.Request, rule *Rule) {
	if r.Header.Get("X-Amz-Target") != "" {
		// An AWS JSON protocol request (DynamoDB, SQS): answer in kind.
		switch rule.Fault {
		case InternalError:
			jsonError(w, http.StatusInternalServerError, "InternalServerError", "Internal server error")
			return
		case SlowDown:
			jsonError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "Service unavailable")
			return
		case ConditionalCheckFailed:
			jsonError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException", "The conditional request failed")
			return
		}
	}
	switch rule.Fault {
	case InternalError:
		s3Error(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case SlowDown:
		s3Error(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case PreconditionFailed:
		s3Error(w, r, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	case ConditionConflict:
		s3Error(w, r, http.StatusConflict, "ConditionalRequestConflict",
			"A conflicting conditional operation is currently in progress against this resource. Please try again.")
	case Timeout:
		hold := rule.Hold
		if hold <= 0 {
			hold = 300 * time.Millisecond
		}
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		drop(w, false)
	case Reset:
		drop(w, true)
	}
}

// drop closes the client connection without a response; with rst, by a
// TCP reset (linger 0).
func drop(w http.ResponseWriter, rst bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		tc.SetLinger(0)
	}
	conn.Close()
}

// jsonError answers as the AWS JSON protocols (DynamoDB, SQS) do.
func jsonError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.Header().Set("x-amzn-RequestId", "faultproxy")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":%q,"message":%q}`, typ, msg)
}

// AWSTarget matches AWS JSON protocol requests whose X-Amz-Target ends
// with "."+op (for example "UpdateItem", "ReceiveMessage"); op "" matches
// every JSON protocol request.
func AWSTarget(op string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		t := r.Header.Get("X-Amz-Target")
		return t != "" && (op == "" || strings.HasSuffix(t, "."+op))
	}
}

func s3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", "faultproxy")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>faultproxy</RequestId></Error>`,
		code, msg, html.EscapeString(r.URL.Path))
}

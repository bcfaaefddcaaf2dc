package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// fakeS3 serves canned responses; handler gets the method and request.
func fakeS3(t *testing.T, handler http.HandlerFunc) *objstore.S3 {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	client := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1,
	})
	return objstore.NewS3(client, "bucket")
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>fake %s</Message></Error>`, code, code)
}

func TestS3ErrorMapping(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		status int
		code   string
		call   func(*objstore.S3) error
		want   error // nil: must not wrap ErrExists or ErrNotExist
	}{
		{"put-if-absent 412", 412, "PreconditionFailed", func(s *objstore.S3) error { return s.PutIfAbsent(ctx, "k", []byte("x")) }, objstore.ErrExists},
		{"put-if-absent 409", 409, "ConditionalRequestConflict", func(s *objstore.S3) error { return s.PutIfAbsent(ctx, "k", []byte("x")) }, objstore.ErrExists},
		{"put-if-absent 403", 403, "AccessDenied", func(s *objstore.S3) error { return s.PutIfAbsent(ctx, "k", []byte("x")) }, nil},
		{"get NoSuchKey", 404, "NoSuchKey", func(s *objstore.S3) error { _, err := s.Get(ctx, "k"); return err }, objstore.ErrNotExist},
		{"get NoSuchBucket", 404, "NoSuchBucket", func(s *objstore.S3) error { _, err := s.Get(ctx, "k"); return err }, nil},
		{"head 404", 404, "", func(s *objstore.S3) error { _, err := s.Head(ctx, "k"); return err }, objstore.ErrNotExist},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fakeS3(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "*" {
					t.Errorf("PUT without If-None-Match: *")
				}
				if c.code == "" || r.Method == http.MethodHead {
					w.WriteHeader(c.status)
					return
				}
				s3Error(w, c.status, c.code)
			})
			err := c.call(s)
			if err == nil {
				t.Fatal("no error")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("err = %v, want %v", err, c.want)
			}
			if c.want == nil && (errors.Is(err, objstore.ErrExists) || errors.Is(err, objstore.ErrNotExist)) {
				t.Errorf("err = %v, should not map to a sentinel", err)
			}
			if !strings.Contains(err.Error(), "k") {
				t.Errorf("err %v does not name the key", err)
			}
		})
	}
}

func TestS3DeletePerKeyErrors(t *testing.T) {
	var body string
	s := fakeS3(t, func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.URL.Query()["delete"]; r.Method != http.MethodPost || !ok {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`+
			`<Error><Key>gone</Key><Code>NoSuchKey</Code><Message>missing</Message></Error>`+
			`<Error><Key>locked</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`+
			`</DeleteResult>`)
	})
	err := s.Delete(context.Background(), []string{"ok", "gone", "locked"})
	var de *objstore.DeleteError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want *DeleteError", err)
	}
	want := []objstore.KeyError{{Key: "locked", Code: "AccessDenied", Message: "Access Denied"}}
	if fmt.Sprint(de.Failed) != fmt.Sprint(want) {
		t.Errorf("failed = %+v, want %+v", de.Failed, want)
	}
	if !strings.Contains(body, "<Quiet>true</Quiet>") {
		t.Errorf("request not in quiet mode: %s", body)
	}
	n, err := objstore.DeleteAll(context.Background(), s, []string{"ok", "gone", "locked"}, 0)
	if n != 2 || !errors.As(err, &de) || len(de.Failed) != 1 {
		t.Errorf("DeleteAll = %d, %v; want 2 deleted and one failed key", n, err)
	}
}

func TestS3RetriesSlowDown(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	var puts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if puts.Add(1) == 1 {
			s3Error(w, 503, "SlowDown")
			return
		}
		w.Header().Set("ETag", `"abc"`)
	}))
	defer srv.Close()
	s, err := objstore.NewS3FromConfig(context.Background(), objstore.S3Options{
		Bucket: "bucket", Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), "k", []byte("data")); err != nil {
		t.Fatalf("put after one SlowDown: %v", err)
	}
	if n := puts.Load(); n != 2 {
		t.Errorf("server saw %d PUTs, want 2", n)
	}
}

// lossyProxy forwards to the S3 endpoint, but for the first conditional PUT
// it replaces the server's answer with a 500, as if the response was lost
// after the write was applied. With failGets, GETs are answered 403.
type lossyProxy struct {
	mu       sync.Mutex
	injected int
	failGets bool
}

func (p *lossyProxy) faults() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected
}

func (p *lossyProxy) store(t *testing.T) *objstore.S3 {
	base := testenv.S3Store(t)
	target, err := url.Parse(testenv.S3Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = target.Scheme, target.Host
			r.Out.Host = r.In.Host // keep the signed Host header
		},
		ModifyResponse: func(resp *http.Response) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			r := resp.Request
			inject := r.Method == http.MethodPut && r.Header.Get("If-None-Match") == "*" && p.injected == 0
			if r.Method == http.MethodGet && p.failGets {
				inject = true
			}
			if !inject {
				return nil
			}
			if r.Method == http.MethodPut {
				p.injected++
			}
			status, code := 500, "InternalError"
			if r.Method == http.MethodGet {
				status, code = 403, "AccessDenied"
			}
			resp.Body.Close()
			body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
			resp.StatusCode, resp.Status = status, http.StatusText(status)
			resp.Body = io.NopCloser(strings.NewReader(body))
			resp.ContentLength = int64(len(body))
			resp.Header = http.Header{"Content-Type": {"application/xml"}, "Content-Length": {fmt.Sprint(len(body))}}
			return nil
		},
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	opts := base.Client().Options()
	opts.BaseEndpoint = aws.String(srv.URL)
	return objstore.NewS3(s3.New(opts), base.Bucket())
}

func TestS3PutIfAbsentLostResponse(t *testing.T) {
	ctx := context.Background()
	t.Run("OwnWriteApplied", func(t *testing.T) {
		p := &lossyProxy{}
		s := p.store(t)
		// Attempt 1 is applied but answered 500; the SDK retries and gets
		// 412 for our own object. That is a win, not ErrExists.
		if err := s.PutIfAbsent(ctx, "v/1.manifest", []byte("mine")); err != nil {
			t.Fatalf("put-if-absent: %v", err)
		}
		if n := p.faults(); n != 1 {
			t.Fatalf("proxy injected %d faults, want 1", n)
		}
		if got, _ := s.Get(ctx, "v/1.manifest"); string(got) != "mine" {
			t.Errorf("content %q", got)
		}
	})
	t.Run("OtherWriterWon", func(t *testing.T) {
		p := &lossyProxy{}
		s := p.store(t)
		if err := s.Put(ctx, "v/1.manifest", []byte("theirs")); err != nil {
			t.Fatal(err)
		}
		err := s.PutIfAbsent(ctx, "v/1.manifest", []byte("mine"))
		if n := p.faults(); !errors.Is(err, objstore.ErrExists) || n != 1 {
			t.Errorf("err = %v (injected %d), want ErrExists after a retry", err, n)
		}
	})
	t.Run("ReadBackFails", func(t *testing.T) {
		p := &lossyProxy{failGets: true}
		s := p.store(t)
		err := s.PutIfAbsent(ctx, "v/1.manifest", []byte("mine"))
		if err == nil || errors.Is(err, objstore.ErrExists) || !strings.Contains(err.Error(), "outcome unknown") {
			t.Errorf("err = %v, want an outcome-unknown error that is not ErrExists", err)
		}
	})
}

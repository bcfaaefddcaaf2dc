// Package awshttp holds the HTTP client tablekeep gives the AWS SDK for the
// JSON-protocol services it calls with small bodies (DynamoDB, SQS).
//
// Why: smithy-go wraps each request body in a reader that its client
// handler closes as soon as net/http returns the response, and whose
// WriteTo then answers io.EOF as an error. When the response arrives while
// net/http's write loop is still finishing the request (the server has the
// bytes it needs; a loaded machine deschedules the writer), the write loop
// fails with that EOF and closes the connection under the response being
// read. The SDK sees "use of closed network connection" (and logs "response
// did not match expected checksum, X, 0": zero bytes were read), treats it
// as a transport error and resends a request the server has already
// applied. Seen on the local stack under load in 3 of 5 CI runs (a lock's
// UpdateItem applied twice); observed with httptrace (WroteRequest reports
// EOF) and gone with the bodies below. Every lock operation also recognises
// its own applied write (shared/lock), since on AWS a response can be lost
// for other reasons too.
package awshttp

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// MaxBufferedBody is the largest request body copied; larger ones (none
// for DynamoDB items of a lock or SQS batches of cleanup messages) are
// passed through as they are.
const MaxBufferedBody = 1 << 20

// PrivateBodies wraps base (nil: the SDK's default client) so that every
// request body up to MaxBufferedBody reaches net/http as a private
// in-memory copy that nobody else closes.
func PrivateBodies(base aws.HTTPClient) aws.HTTPClient {
	if base == nil {
		base = awshttp.NewBuildableClient()
	}
	return privateBodies{base}
}

// Config returns cfg with its HTTP client wrapped by PrivateBodies.
func Config(cfg aws.Config) aws.Config {
	cfg.HTTPClient = PrivateBodies(cfg.HTTPClient)
	return cfg
}

type privateBodies struct{ base aws.HTTPClient }

func (c privateBodies) Do(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength < 0 || r.ContentLength > MaxBufferedBody {
		return c.base.Do(r)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength+1))
	r.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	cp := r.Clone(r.Context())
	cp.Body = io.NopCloser(bytes.NewReader(b))
	cp.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return c.base.Do(cp)
}

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

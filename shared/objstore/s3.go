package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// DefaultS3MaxAttempts is how many times the SDK's standard retryer tries one
// call (first attempt included) on throttling (503 SlowDown), 5xx and
// connection errors.
const DefaultS3MaxAttempts = 6

// ErrSlowDown: S3 answered 503 SlowDown (request rate too high for the
// prefix) on every attempt the SDK's retryer made. Callers pacing their
// requests lower their rate on it; a per-key SlowDown inside a
// DeleteObjects answer comes back as a KeyError with Code "SlowDown".
var ErrSlowDown = errors.New("slow down")

// S3 is a Store over one S3 bucket. Each method is one S3 API call; the SDK
// may retry that call on throttling or transient errors.
type S3 struct {
	client *s3.Client
	bucket string
}

var _ Store = (*S3)(nil)

// NewS3 returns a Store over bucket using client.
func NewS3(client *s3.Client, bucket string) *S3 {
	return &S3{client: client, bucket: bucket}
}

// S3Options configures NewS3FromConfig.
type S3Options struct {
	Bucket string
	// Endpoint overrides the service endpoint (e.g. http://127.0.0.1:7070
	// for a local server). Empty means the SDK's default resolution
	// (which also honours AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL).
	Endpoint string
	// Region; empty means the environment's (AWS_REGION, profile), else us-east-1.
	Region string
	// PathStyle addresses the bucket in the path (http://host/bucket/key),
	// needed by most local servers.
	PathStyle bool
	// MaxAttempts per call for the standard retryer; 0 means DefaultS3MaxAttempts.
	MaxAttempts int
}

// NewS3FromConfig builds an S3 client from the default AWS configuration
// chain (credentials from the environment, shared config, or instance role)
// and returns a Store over opts.Bucket.
func NewS3FromConfig(ctx context.Context, opts S3Options) (*S3, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3 store: bucket is required")
	}
	attempts := opts.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultS3MaxAttempts
	}
	loadOpts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return s3Retryer(attempts) }),
		// The SDK's own logger writes to stderr ("WARN falling back to
		// IMDSv1" before a missing-credentials error): the error says it.
		config.WithLogger(logging.Nop{}),
	}
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3 store: load AWS config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
	})
	return NewS3(client, opts.Bucket), nil
}

// s3Retryer is the S3 client's retryer: the SDK's standard one with
// attempts per call. Its attempts and backoffs all run under the call's
// context: none starts after the context's deadline, and the HTTP request
// of the attempt in flight is aborted at it (TestS3CallBoundedByDeadline).
// That deadline, not a per-attempt HTTP timeout, is what bounds a call
// (a manifest write's is table.ManifestPutTimeout); the client sets no
// HTTP timeout of its own, since a data file of 256 MiB may take longer.
func s3Retryer(attempts int) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		// No client-side retry quota: under sustained SlowDown the
		// default token bucket fails calls fast instead of backing
		// off, which is the wrong trade for batch maintenance work.
		o.RateLimiter = ratelimit.None
	})
}

// Bucket is the bucket the store reads and writes.
func (s *S3) Bucket() string { return s.bucket }

// Client is the underlying SDK client.
func (s *S3) Client() *s3.Client { return s.client }

// Rates are S3's per-prefix rates (S3Rates): callers pace themselves to
// them (Paced).
func (s *S3) Rates() Rates { return S3Rates() }

func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, mapSlowDown(mapNotFound(err)))
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("get %s: read body: %w", key, err)
	}
	return b, nil
}

func (s *S3) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("head %s: %w", key, mapNotFound(err))
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified)}, nil
}

func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// PutIfAbsent writes with If-None-Match: *. A 412 PreconditionFailed or 409
// ConditionalRequestConflict becomes ErrExists.
//
// If the SDK retried the call (say the first attempt was applied but its
// response was lost to a 5xx or a dropped connection) and the retry then
// fails its precondition, the key may hold our own write. In that case only,
// PutIfAbsent reads the object back: identical bytes mean our write won and
// it returns nil; different bytes give ErrExists; a failed read gives an error
// that does not wrap ErrExists, since the outcome is unknown.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	var attempts atomic.Int32
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch: aws.String("*"),
	}, s3.WithAPIOptions(countAttempts(&attempts)))
	if err == nil {
		return nil
	}
	if !isConditionFailed(err) {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	if attempts.Load() <= 1 {
		return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
	}
	got, gerr := s.Get(ctx, key)
	switch {
	case gerr != nil:
		return fmt.Errorf("put-if-absent %s: outcome unknown: condition failed on attempt %d after a retried attempt, and reading the key back failed: %w",
			key, attempts.Load(), gerr)
	case bytes.Equal(got, data):
		return nil
	default:
		return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
	}
}

func (s *S3) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	max := opts.MaxKeys
	if max <= 0 || max > MaxListKeys {
		max = MaxListKeys
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, MaxKeys: aws.Int32(int32(max))}
	if opts.Prefix != "" {
		in.Prefix = aws.String(opts.Prefix)
	}
	if opts.StartAfter != "" {
		in.StartAfter = aws.String(opts.StartAfter)
	}
	out, err := s.client.ListObjectsV2(ctx, in)
	if err != nil {
		return ListPage{}, fmt.Errorf("list %s: %w", opts.Prefix, mapSlowDown(err))
	}
	page := ListPage{Truncated: aws.ToBool(out.IsTruncated), Objects: make([]ObjectInfo, 0, len(out.Contents))}
	for _, o := range out.Contents {
		page.Objects = append(page.Objects, ObjectInfo{
			Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified),
		})
	}
	return page, nil
}

// Delete is one DeleteObjects call in quiet mode. Per-key NoSuchKey errors
// count as deleted; other per-key errors come back as a *DeleteError.
func (s *S3) Delete(ctx context.Context, keys []string) error {
	if len(keys) > MaxDeleteKeys {
		return fmt.Errorf("delete %d keys: %w", len(keys), ErrTooManyKeys)
	}
	if len(keys) == 0 {
		return nil
	}
	objs := make([]types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		if err := ValidateKey(k); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
	}
	out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: &s.bucket,
		Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("delete %d keys: %w", len(keys), mapSlowDown(err))
	}
	var failed []KeyError
	for _, e := range out.Errors {
		if aws.ToString(e.Code) == "NoSuchKey" {
			continue
		}
		failed = append(failed, KeyError{Key: aws.ToString(e.Key), Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)})
	}
	if len(failed) > 0 {
		return &DeleteError{Failed: failed}
	}
	return nil
}

// countAttempts adds a middleware after the retry middleware, so it runs
// once per attempt (HTTP request) of the call.
func countAttempts(n *atomic.Int32) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("tablekeepCountAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				n.Add(1)
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// mapNotFound wraps ErrNotExist into a missing-key error (a missing bucket
// stays a plain error: it is a configuration problem, not an absent key).
func mapNotFound(err error) error {
	code := errorCode(err)
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) || code == "NoSuchKey" || code == "NotFound" ||
		(httpStatus(err) == http.StatusNotFound && code != "NoSuchBucket") {
		return fmt.Errorf("%w: %w", ErrNotExist, err)
	}
	return err
}

// mapSlowDown wraps ErrSlowDown into a SlowDown answer.
func mapSlowDown(err error) error {
	if errorCode(err) == "SlowDown" || httpStatus(err) == http.StatusServiceUnavailable {
		return fmt.Errorf("%w: %w", ErrSlowDown, err)
	}
	return err
}

// isConditionFailed reports whether a conditional write lost: 412
// PreconditionFailed, or 409 ConditionalRequestConflict (two conditional
// writes raced on S3).
func isConditionFailed(err error) bool {
	switch errorCode(err) {
	case "PreconditionFailed", "ConditionalRequestConflict":
		return true
	}
	st := httpStatus(err)
	return st == http.StatusPreconditionFailed || (st == http.StatusConflict && errorCode(err) == "")
}

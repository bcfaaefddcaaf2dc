package faultproxy

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// MaxBackoff caps the SDK's retry backoff in NewS3 (the SDK default is
// 20 s, with about 1 s for the first retry), so fault tests stay fast.
const MaxBackoff = 50 * time.Millisecond

// NewS3 returns an objstore.S3 over bucket at endpoint (the proxy's URL)
// configured like objstore.NewS3FromConfig: the standard retryer with
// objstore.DefaultS3MaxAttempts attempts and no client-side retry quota;
// only the backoff is capped at MaxBackoff. Credentials come from the
// environment, as for NewS3FromConfig.
func NewS3(ctx context.Context, endpoint, bucket string) (*objstore.S3, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = objstore.DefaultS3MaxAttempts
				o.RateLimiter = ratelimit.None
				o.Backoff = retry.NewExponentialJitterBackoff(MaxBackoff)
			})
		}))
	if err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
	return objstore.NewS3(client, bucket), nil
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// TestStatusBucketProblem: an S3 warehouse whose bucket the functions would
// refuse at cold start (versioned, no noncurrent-version expiration: deletes
// reclaim nothing) is unhealthy in status, with the functions' own
// explanation; a check that could not be made, or a local warehouse, is not.
func TestStatusBucketProblem(t *testing.T) {
	ctx := context.Background()
	refused := fmt.Errorf("%w: bucket b has versioning Enabled; add an enabled lifecycle rule ... NoncurrentVersionExpiration", warehouse.ErrVersionedBucket)
	for _, c := range []struct {
		name  string
		check func(context.Context) error
		want  string
	}{
		{"local warehouse", nil, ""},
		{"fine bucket", func(context.Context) error { return nil }, ""},
		{"versioned without the rule", func(context.Context) error { return refused }, "NoncurrentVersionExpiration"},
		{"check failed", func(context.Context) error { return errors.New("connection reset") }, ""},
	} {
		got := bucketProblem(ctx, &whouse{Warehouse: &warehouse.Warehouse{URI: "s3://b/wh"}, CheckBucket: c.check})
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

package awsfn_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/table"
)

func awsConfig(t *testing.T) aws.Config {
	t.Helper()
	endpoint := testenv.AWSEndpoint(t)
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatalf("aws config: %v", err)
	}
	cfg.BaseEndpoint = aws.String(endpoint)
	return cfg
}

func dynamoClient(t *testing.T) *dynamodb.Client { return dynamodb.NewFromConfig(awsConfig(t)) }
func sqsClient(t *testing.T) *sqs.Client         { return sqs.NewFromConfig(awsConfig(t)) }

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// registrySchema is the shape of the seed's registry: a name key and a URI.
var registrySchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "uri", Type: arrow.BinaryTypes.String},
}, nil)

func row(name, uri string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, registrySchema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(name)
	b.Field(1).(*array.StringBuilder).Append(uri)
	return b.NewRecordBatch()
}

func rows(t *testing.T, tb *table.Table) map[string]string {
	t.Helper()
	ctx := context.Background()
	snap, err := tb.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err = snap.Scan(ctx, table.ScanOptions{}, func(r arrow.RecordBatch) error {
		for i := 0; i < int(r.NumRows()); i++ {
			got[r.Column(0).(*array.String).Value(i)] = r.Column(1).(*array.String).Value(i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameRows(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

type fakeClock = fakeclock.Clock

// skewed reads base shifted by off: a machine whose clock is wrong.
type skewed struct {
	base *fakeClock
	off  time.Duration
}

func (c skewed) Now() time.Time                                   { return c.base.Now().Add(c.off) }
func (c skewed) Sleep(ctx context.Context, d time.Duration) error { return c.base.Sleep(ctx, d) }

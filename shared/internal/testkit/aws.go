package testkit

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tablekeep/tablekeep/shared/internal/awshttp"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
)

// AWSConfig is the configuration for the local moto_server
// (TABLEKEEP_AWS_ENDPOINT) as the functions build their DynamoDB and SQS
// clients: request bodies private to net/http (shared/internal/awshttp), so
// the SDK never resends an applied write because of the local race.
func AWSConfig(t testing.TB) aws.Config {
	t.Helper()
	endpoint := testenv.AWSEndpoint(t)
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatalf("aws config: %v", err)
	}
	cfg.BaseEndpoint = aws.String(endpoint)
	return awshttp.Config(cfg)
}

// DynamoClient is a DynamoDB client for moto_server (AWSConfig).
func DynamoClient(t testing.TB) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(AWSConfig(t))
}

// SQSClient is an SQS client for moto_server (AWSConfig).
func SQSClient(t testing.TB) *sqs.Client {
	t.Helper()
	return sqs.NewFromConfig(AWSConfig(t))
}

// QueueDepth is the number of messages in the queue at url, visible,
// in flight or delayed.
func QueueDepth(t testing.TB, c *sqs.Client, url string) int {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}

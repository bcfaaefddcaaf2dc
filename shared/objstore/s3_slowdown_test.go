package objstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

// TestMapSlowDown: S3's SlowDown answer (after the SDK's retries) wraps
// ErrSlowDown; other errors do not.
func TestMapSlowDown(t *testing.T) {
	slow := fmt.Errorf("operation error S3: DeleteObjects: %w", &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."})
	if err := mapSlowDown(slow); !errors.Is(err, ErrSlowDown) {
		t.Fatalf("%v does not wrap ErrSlowDown", err)
	}
	other := &smithy.GenericAPIError{Code: "AccessDenied"}
	if err := mapSlowDown(other); errors.Is(err, ErrSlowDown) {
		t.Fatalf("%v wraps ErrSlowDown", err)
	}
}

package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"
)

// s3Error renders an AWS error as one line in the CLI's style, without
// request ids: "s3://b/x: bucket does not exist", "no AWS credentials
// found". Other errors are returned as they are.
func s3Error(uri string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "failed to retrieve credentials") || strings.Contains(msg, "no EC2 IMDS role found") ||
		strings.Contains(msg, "static credentials are empty") {
		return fmt.Errorf("%s: no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)", uri)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.ErrorCode() {
	case "NoSuchBucket":
		return fmt.Errorf("%s: bucket does not exist", uri)
	case "AccessDenied", "Forbidden", "403":
		return fmt.Errorf("%s: permission denied", uri)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "UnrecognizedClientException", "InvalidClientTokenId":
		return fmt.Errorf("%s: AWS credentials rejected (%s)", uri, ae.ErrorCode())
	case "ResourceNotFoundException":
		return fmt.Errorf("%s: %s", uri, ae.ErrorMessage())
	}
	if m := ae.ErrorMessage(); m != "" {
		return fmt.Errorf("%s: %s: %s", uri, ae.ErrorCode(), m)
	}
	return fmt.Errorf("%s: %s", uri, ae.ErrorCode())
}

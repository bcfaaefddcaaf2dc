package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"regexp"
	"strings"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tablekeep/tablekeep/shared/table"
)

// styled rewrites errors from below the CLI into its own style: AWS
// errors in one line without request ids (s3Error), permission denied
// naming the path, a pruned version naming the table and version rather
// than the manifest's object key. loc is the --table location (may be "").
func styled(err error, loc string) error {
	var ae smithy.APIError
	var oe *net.OpError
	var de *smithy.DeserializationError
	var re *smithyhttp.ResponseError
	switch {
	case errors.As(err, &oe):
		if loc == "" {
			loc = "aws"
		}
		return endpointError(loc, err, oe)
	case !noCredentials(err.Error()) && (errors.As(err, &de) || (errors.As(err, &re) && re.HTTPStatusCode() != 0 && !errors.As(err, &ae))):
		// A reply, but not one S3 sends (no S3 error code in it).
		if loc == "" {
			loc = "aws"
		}
		return notS3Error(loc, err)
	case errors.As(err, &ae) || noCredentials(err.Error()):
		if loc == "" {
			loc = "aws"
		}
		if strings.HasPrefix(err.Error(), "s3://") {
			// Already named by the warehouse: keep that prefix.
			loc, _, _ = strings.Cut(err.Error(), ": ")
		}
		return s3Error(loc, err)
	case errors.Is(err, fs.ErrPermission):
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s: permission denied", pe.Path)
		}
		return fmt.Errorf("%s: permission denied", loc)
	case errors.Is(err, table.ErrCorruptManifest):
		// The table package names the manifest's object key, whose
		// number is the inverted version: add the version, and the
		// table's location.
		msg := manifestKeyRe.ReplaceAllStringFunc(err.Error(), func(k string) string {
			_, name, _ := strings.Cut(k, "_versions/")
			if v, ok := table.ParseManifestKey("_versions/" + name); ok {
				return fmt.Sprintf("%s (version %d)", k, v)
			}
			return k
		})
		if loc != "" && !strings.HasPrefix(msg, loc) {
			msg = loc + ": " + msg
		}
		return fmt.Errorf("%s%w", msg, quiet{err})
	case errors.Is(err, table.ErrVersionPruned) && loc != "":
		// The table package names the manifest key (with its inverted
		// version number): name the table and the version instead.
		if i := strings.Index(err.Error(), "version "); i >= 0 {
			return fmt.Errorf("%s: %s", loc, err.Error()[i:])
		}
	}
	return err
}

// endpointError is a network failure reaching an AWS service, in one line
// naming the variable that sets its endpoint (the SDK's error is a
// paragraph, after six attempts).
func endpointError(loc string, err error, oe *net.OpError) error {
	service, vars := "S3", "AWS_ENDPOINT_URL_S3 (or TABLEKEEP_S3_ENDPOINT, as .stack/env sets it)"
	var op *smithy.OperationError
	if errors.As(err, &op) && op.ServiceID != "" && op.ServiceID != "S3" {
		service = op.ServiceID
		vars = "AWS_ENDPOINT_URL_" + strings.ToUpper(op.ServiceID) + " (or TABLEKEEP_AWS_ENDPOINT, as .stack/env sets it)"
	}
	why := oe.Err.Error()
	var se *os.SyscallError
	if errors.As(oe.Err, &se) {
		why = se.Err.Error()
	}
	addr := ""
	if oe.Addr != nil {
		addr = " at " + oe.Addr.String()
	}
	return fmt.Errorf("%s: cannot reach %s%s (%s): check %s", loc, service, addr, why, vars)
}

// notS3Error is the error of an endpoint whose reply S3 would not send (a
// web page, another service): said so, with the HTTP status, instead of
// the SDK's XML parse error.
func notS3Error(loc string, err error) error {
	status := ""
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = fmt.Sprintf("HTTP %d, ", re.HTTPStatusCode())
	}
	at := ""
	for _, v := range []string{"AWS_ENDPOINT_URL_S3", EnvStackS3Endpoint} {
		if ep := os.Getenv(v); ep != "" && at == "" {
			at = " " + ep
		}
	}
	return fmt.Errorf("%s: the endpoint%s does not answer as S3 (%sa reply that is not S3's XML): check AWS_ENDPOINT_URL_S3 (or TABLEKEEP_S3_ENDPOINT, as .stack/env sets it)", loc, at, status)
}

// manifestKeyRe finds a tablekeep manifest key in an error message.
var manifestKeyRe = regexp.MustCompile(`\S*_versions/\d{20}\.manifest`)

func noCredentials(msg string) bool {
	for _, s := range []string{"failed to retrieve credentials", "failed to refresh cached credentials",
		"no EC2 IMDS role found", "static credentials are empty", "get credentials:"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// sdkOneLine renders an error that wraps an AWS SDK error as the caller's
// context plus "SERVICE OPERATION: CODE: message", without the request id,
// status and host ids; other errors as they are.
func sdkOneLine(err error) string {
	msg := err.Error()
	if noCredentials(msg) {
		return "no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return msg
	}
	prefix, _, _ := strings.Cut(msg, "operation error ")
	what := ""
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		what = oe.ServiceID + " " + oe.OperationName + ": "
	}
	detail := ae.ErrorCode()
	if m := ae.ErrorMessage(); m != "" {
		detail += ": " + m
	}
	if ae.ErrorCode() == "ResourceNotFoundException" && strings.HasPrefix(what, "DynamoDB") {
		detail += " (no such DynamoDB table: check --lock-table / " + "TABLEKEEP_LOCK_TABLE)"
	}
	return prefix + what + detail
}

// prunedErr says that version v of t was pruned, and which are readable.
func prunedErr(loc string, t *table.Table, v uint64) error {
	latest := uint64(0)
	if m := t.Cached(); m != nil {
		latest = m.Version
	}
	return fmt.Errorf("%s: version %d was pruned (%w; the latest is %d, see `tablekeep versions`)", loc, v, table.ErrVersionPruned, latest)
}

// s3Error renders an AWS error as one line in the CLI's style, without
// request ids: "s3://b/x: bucket does not exist", "no AWS credentials
// found". Other errors are returned as they are.
func s3Error(uri string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if noCredentials(msg) {
		return fmt.Errorf("%s: no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)", uri)
	}
	if oe := (*net.OpError)(nil); errors.As(err, &oe) {
		return endpointError(uri, err, oe)
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

// sayErr is an error whose message says it all: it wraps err (for
// errors.Is) without repeating err's text ("key "nope" not found at
// version 2", not "...: key not found").
type sayErr struct {
	msg string
	err error
}

func (e *sayErr) Error() string { return e.msg }
func (e *sayErr) Unwrap() error { return e.err }

package objstore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
)

var (
	schemeRE = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*)://`)
	// S3 bucket naming rules (lowercase DNS-style, 3-63 characters).
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
)

// ParseURI splits a table location into its parts:
//
//	s3://bucket/some/prefix  -> "s3", "bucket", "some/prefix"
//	s3://bucket              -> "s3", "bucket", ""
//	file:///abs/path         -> "file", "", "/abs/path"
//	relative/or/abs/path     -> "file", "", "relative/or/abs/path"
//
// For local locations prefix is the directory path. The S3 prefix has its
// leading and trailing slashes removed and must be a valid key (no "." or
// ".." segments, no empty segments).
func ParseURI(uri string) (scheme, bucket, prefix string, err error) {
	if strings.TrimSpace(uri) == "" {
		return "", "", "", fmt.Errorf("empty store URI")
	}
	m := schemeRE.FindStringSubmatch(uri)
	if m == nil {
		switch lower := strings.ToLower(uri); {
		case strings.HasPrefix(lower, "s3:"):
			return "", "", "", fmt.Errorf("malformed S3 URI %q: want s3://bucket/prefix", uri)
		case strings.HasPrefix(lower, "file:"):
			return "", "", "", fmt.Errorf("malformed file URI %q: want file:///absolute/path", uri)
		}
		return "file", "", uri, nil
	}
	switch strings.ToLower(m[1]) {
	case "s3":
		rest := uri[len(m[0]):]
		bucket, prefix, _ = strings.Cut(rest, "/")
		if bucket == "" {
			return "", "", "", fmt.Errorf("malformed S3 URI %q: no bucket (want s3://bucket/prefix)", uri)
		}
		if !bucketRE.MatchString(bucket) {
			return "", "", "", fmt.Errorf("malformed S3 URI %q: invalid bucket name %q", uri, bucket)
		}
		prefix = strings.Trim(prefix, "/")
		if prefix != "" {
			if err := ValidateKey(prefix); err != nil || strings.Contains(prefix, "//") {
				return "", "", "", fmt.Errorf("malformed S3 URI %q: invalid prefix %q", uri, prefix)
			}
		}
		return "s3", bucket, prefix, nil
	case "file":
		u, err := url.Parse(uri)
		if err != nil {
			return "", "", "", fmt.Errorf("malformed file URI %q: %w", uri, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return "", "", "", fmt.Errorf("malformed file URI %q: host %q is not local (want file:///absolute/path)", uri, u.Host)
		}
		if !strings.HasPrefix(u.Path, "/") {
			return "", "", "", fmt.Errorf("malformed file URI %q: want file:///absolute/path", uri)
		}
		return "file", "", u.Path, nil
	default:
		return "", "", "", fmt.Errorf("unsupported store URI scheme %q in %q (want s3://bucket/prefix, file:///path or a local path)", m[1], uri)
	}
}

// Open returns the store for a table location and the key prefix (root)
// inside it under which the table lives:
//
//   - s3://bucket/some/prefix: an S3 store for bucket, root "some/prefix".
//     The endpoint comes from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL;
//     path-style addressing is used when an endpoint is set or
//     TABLEKEEP_S3_PATH_STYLE=1. Credentials and region come from the
//     environment (AWS_REGION, default us-east-1).
//   - a local path or file:///path: a Disk store rooted at that directory
//     (created if needed), root "".
func Open(ctx context.Context, uri string) (Store, string, error) {
	scheme, bucket, prefix, err := ParseURI(uri)
	if err != nil {
		return nil, "", err
	}
	if scheme == "s3" {
		endpoint := os.Getenv("AWS_ENDPOINT_URL_S3")
		if endpoint == "" {
			endpoint = os.Getenv("AWS_ENDPOINT_URL")
		}
		ps := os.Getenv("TABLEKEEP_S3_PATH_STYLE")
		st, err := NewS3FromConfig(ctx, S3Options{
			Bucket:    bucket,
			Endpoint:  endpoint,
			PathStyle: endpoint != "" || ps == "1" || strings.EqualFold(ps, "true"),
		})
		if err != nil {
			return nil, "", fmt.Errorf("open %s: %w", uri, err)
		}
		return st, prefix, nil
	}
	d, err := NewDisk(prefix)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", uri, err)
	}
	return d, "", nil
}

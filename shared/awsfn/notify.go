package awsfn

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/tablekeep/tablekeep/shared/queue"
)

// S3 event notifications (issue 11, point 4): a new manifest under the
// warehouse marks its table dirty. Two delivery formats reach the
// compaction queue: S3's own notification (S3 -> SQS, or a relay such as
// the local versitygw webhook one) and EventBridge's "Object Created" event
// (S3 -> EventBridge rule -> SQS, what template.yaml sets up).

// ManifestKey is one object-created notification of a manifest.
type ManifestKey struct {
	Bucket string
	Key    string // decoded object key
}

// s3Notification is S3's notification body (only what is used).
type s3Notification struct {
	Records []struct {
		EventSource string `json:"eventSource"`
		EventName   string `json:"eventName"`
		S3          struct {
			Bucket struct {
				Name string `json:"name"`
			} `json:"bucket"`
			Object struct {
				Key string `json:"key"`
			} `json:"object"`
		} `json:"s3"`
	} `json:"Records"`
	Event   string `json:"Event"`   // s3:TestEvent
	Service string `json:"Service"` // "Amazon S3"
}

// eventBridgeS3 is an EventBridge event from S3.
type eventBridgeS3 struct {
	Source     string `json:"source"`
	DetailType string `json:"detail-type"`
	Detail     struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key string `json:"key"`
		} `json:"object"`
	} `json:"detail"`
}

// ParseNotification reads the object-created records of an S3 notification
// or an EventBridge S3 event. ok is false if body is neither (a table job,
// or garbage); a notification carrying no object-created record (S3's
// s3:TestEvent, a delete) returns ok with no keys. Keys of S3 notifications
// are URL-decoded as S3 encodes them ('+' for a space).
func ParseNotification(body []byte) (keys []ManifestKey, ok bool, err error) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(body, &probe) != nil {
		return nil, false, nil
	}
	switch {
	case probe["Records"] != nil:
		var n s3Notification
		if err := json.Unmarshal(body, &n); err != nil {
			return nil, true, fmt.Errorf("%w: %w: malformed S3 notification: %v", queue.ErrPermanent, ErrInvalidJob, err)
		}
		for i, r := range n.Records {
			if r.EventSource != "aws:s3" {
				return nil, true, fmt.Errorf("%w: %w: S3 notification record %d has eventSource %q, want aws:s3", queue.ErrPermanent, ErrInvalidJob, i, r.EventSource)
			}
			if !strings.HasPrefix(r.EventName, "ObjectCreated:") {
				continue
			}
			k, err := url.QueryUnescape(r.S3.Object.Key)
			if err != nil {
				return nil, true, fmt.Errorf("%w: %w: S3 notification key %q: %v", queue.ErrPermanent, ErrInvalidJob, r.S3.Object.Key, err)
			}
			keys = append(keys, ManifestKey{Bucket: r.S3.Bucket.Name, Key: k})
		}
		return keys, true, nil
	case probe["Event"] != nil && probe["Service"] != nil: // s3:TestEvent
		return nil, true, nil
	case probe["detail-type"] != nil && probe["source"] != nil:
		var e eventBridgeS3
		if err := json.Unmarshal(body, &e); err != nil {
			return nil, true, fmt.Errorf("%w: %w: malformed EventBridge event: %v", queue.ErrPermanent, ErrInvalidJob, err)
		}
		if e.Source != "aws.s3" {
			return nil, true, fmt.Errorf("%w: %w: EventBridge event from %q, want aws.s3", queue.ErrPermanent, ErrInvalidJob, e.Source)
		}
		if e.DetailType != "Object Created" {
			return nil, true, nil
		}
		return []ManifestKey{{Bucket: e.Detail.Bucket.Name, Key: e.Detail.Object.Key}}, true, nil
	}
	return nil, false, nil
}

// manifestTableRoot returns the table root of a manifest key
// (<root>_versions/<20 digits>.manifest), or false.
func manifestTableRoot(key string) (string, bool) {
	const dir = "_versions/"
	name, ok := strings.CutSuffix(key, ".manifest")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(name, "/")
	if i < 0 || !strings.HasSuffix(name[:i+1], dir) {
		return "", false
	}
	digits := name[i+1:]
	if len(digits) != 20 || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	return name[:i+1-len(dir)], true
}

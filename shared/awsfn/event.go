package awsfn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ErrUnsupportedEvent: the function was invoked with an event it does not
// take (for example an SQS batch sent to the compactor).
var ErrUnsupportedEvent = errors.New("unsupported event")

// Event sources of scheduled invocations.
const (
	SourceEventBridge = "aws.events"    // EventBridge rule (SAM Schedule)
	SourceScheduler   = "aws.scheduler" // EventBridge Scheduler (SAM ScheduleV2)
)

// ScheduledEvent is the envelope of a scheduled invocation. EventBridge rules
// send detail as an object, EventBridge Scheduler as a JSON string; both are
// accepted and the detail is otherwise ignored.
type ScheduledEvent struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// ParseScheduled accepts an EventBridge or EventBridge Scheduler scheduled
// event and rejects anything else with an error naming what it got.
func ParseScheduled(fn Role, raw []byte) (ScheduledEvent, error) {
	var ev ScheduledEvent
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return ev, fmt.Errorf("%s: %w: not a JSON object (%v); want a scheduled event (source %s or %s), e.g. events/scheduled.json",
			fn, ErrUnsupportedEvent, err, SourceEventBridge, SourceScheduler)
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		return ev, fmt.Errorf("%s: %w: malformed scheduled event: %v", fn, ErrUnsupportedEvent, err)
	}
	switch {
	// Records first: an event that also carries a batch is not a schedule's
	// (found by FuzzParseScheduled: it was accepted by both parsers).
	case keys["Records"] != nil:
		return ev, fmt.Errorf("%s: %w: got a batch of Records (an SQS or S3 event?); this function is invoked by a schedule (source %s or %s)",
			fn, ErrUnsupportedEvent, SourceEventBridge, SourceScheduler)
	case ev.Source == SourceEventBridge || ev.Source == SourceScheduler:
		if ev.DetailType != "Scheduled Event" {
			return ev, fmt.Errorf("%s: %w: source %s with detail-type %q; want \"Scheduled Event\"", fn, ErrUnsupportedEvent, ev.Source, ev.DetailType)
		}
		return ev, nil
	case ev.Source != "":
		return ev, fmt.Errorf("%s: %w: source %q; want a scheduled event (source %s or %s)", fn, ErrUnsupportedEvent, ev.Source, SourceEventBridge, SourceScheduler)
	default:
		return ev, fmt.Errorf("%s: %w: no source (keys %s); want a scheduled event (source %s or %s), e.g. events/scheduled.json",
			fn, ErrUnsupportedEvent, keyList(keys), SourceEventBridge, SourceScheduler)
	}
}

// ParseSQS accepts an SQS event (at least one record, all from aws:sqs).
func ParseSQS(fn Role, raw []byte) (events.SQSEvent, error) {
	var ev events.SQSEvent
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&ev); err != nil {
		return ev, fmt.Errorf("%s: %w: not an SQS event (%v); want {\"Records\": [...]} from aws:sqs, e.g. events/sqs-cleanup.json", fn, ErrUnsupportedEvent, err)
	}
	if len(ev.Records) == 0 {
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(raw, &keys)
		var src string
		_ = json.Unmarshal(keys["source"], &src)
		if src != "" {
			return ev, fmt.Errorf("%s: %w: got an event from %q; this function is invoked by SQS with a batch of Records", fn, ErrUnsupportedEvent, src)
		}
		return ev, fmt.Errorf("%s: %w: no Records (keys %s); want an SQS event, e.g. events/sqs-cleanup.json", fn, ErrUnsupportedEvent, keyList(keys))
	}
	for i, r := range ev.Records {
		if r.EventSource != "aws:sqs" {
			return ev, fmt.Errorf("%s: %w: record %d has eventSource %q; want aws:sqs", fn, ErrUnsupportedEvent, i, r.EventSource)
		}
	}
	return ev, nil
}

func keyList(m map[string]json.RawMessage) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return "[" + strings.Join(ks, " ") + "]"
}

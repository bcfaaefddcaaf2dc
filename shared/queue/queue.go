package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"
)

// Sentinel errors.
var (
	// ErrPermanent marks a handler error that retrying cannot fix (a malformed
	// message, a table that no longer exists). Handlers wrap it:
	// fmt.Errorf("decode range: %w: %w", queue.ErrPermanent, err).
	ErrPermanent = errors.New("permanent failure")
	// ErrMessageTooLarge: a message body exceeds MaxMessageBytes.
	ErrMessageTooLarge = errors.New("message too large")
	// ErrInvalidMessage: a message body is empty or not text SQS accepts
	// (UTF-8 without control characters other than tab, CR and LF).
	ErrInvalidMessage = errors.New("invalid message body")
	// ErrInvalidReceipt: Ack or Nack with a receipt that is not the message's
	// latest (it was acknowledged, or received again since).
	ErrInvalidReceipt = errors.New("invalid or stale receipt")
)

// SQS limits, also enforced by Embedded so that a laptop run fails where AWS
// would.
const (
	MaxMessageBytes  = 1 << 20   // one message body
	MaxBatchBytes    = 256 << 10 // all bodies in one SendMessageBatch
	MaxBatchMessages = 10        // entries in one SendMessageBatch or ReceiveMessage
)

// Message is one message to send.
type Message struct {
	// Body must be non-empty UTF-8 text without control characters other
	// than tab, CR and LF (SQS bodies are XML text); JSON is the convention.
	Body []byte
	// GroupKey is the message group (MessageGroupId): on a standard SQS
	// queue it makes the queue a fair queue (a group's backlog does not
	// delay other groups' messages; Embedded delivers round-robin across
	// groups), on a FIFO queue it orders the group. tablekeep's senders set
	// it to the table's name. DedupID is a FIFO queue's deduplication id
	// (other queues ignore it).
	GroupKey string
	DedupID  string
}

// Delivery is one received message.
type Delivery struct {
	ID           string // message id, the same on every delivery of a message
	Receipt      string // handle for Ack and Nack, new on every delivery
	Body         []byte
	ReceiveCount int // 1 on the first delivery (approximate on SQS)
}

// Queue is an at-least-once message queue.
type Queue interface {
	// Send enqueues msgs. On error some of them may have been sent.
	Send(ctx context.Context, msgs []Message) error
	// Receive returns up to n visible messages (fewer, or none, is normal)
	// and hides them for visibility (zero: the queue's default).
	Receive(ctx context.Context, n int, visibility time.Duration) ([]Delivery, error)
	// Ack deletes a delivered message.
	Ack(ctx context.Context, d Delivery) error
	// Nack makes a delivered message visible again after delay instead of at
	// the end of its visibility timeout.
	Nack(ctx context.Context, d Delivery, delay time.Duration) error
}

// Handler processes one message body. It returns an error wrapping
// ErrPermanent for a message that must not be retried.
type Handler func(ctx context.Context, body []byte) error

// validate checks what SQS would reject before anything is sent.
func validate(msgs []Message) error {
	for i, m := range msgs {
		if len(m.Body) > MaxMessageBytes {
			return fmt.Errorf("message %d: %w: %d bytes, limit %d", i, ErrMessageTooLarge, len(m.Body), MaxMessageBytes)
		}
		if len(m.Body) == 0 || !utf8.Valid(m.Body) {
			return fmt.Errorf("message %d: %w: empty or not UTF-8", i, ErrInvalidMessage)
		}
		if j := bytes.IndexFunc(m.Body, func(r rune) bool { return !sqsChar(r) }); j >= 0 {
			return fmt.Errorf("message %d: %w: character %U at byte %d", i, ErrInvalidMessage, []rune(string(m.Body[j:]))[0], j)
		}
	}
	return nil
}

// sqsChar reports whether SQS accepts r in a message body (the XML 1.0
// characters; moto accepts more).
func sqsChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || r >= 0x10000
}

// DrainOptions configure Drain.
type DrainOptions struct {
	// BatchSize is the most messages per Receive (default and limit
	// MaxBatchMessages).
	BatchSize int
	// Visibility is the visibility timeout per Receive (zero: the queue's
	// default). It must exceed the handler's running time, or a message is
	// redelivered while still being handled.
	Visibility time.Duration
	// RetryDelay, if positive, makes a failed message visible again after
	// this delay instead of at the end of its visibility timeout.
	RetryDelay time.Duration
	// MaxReceives, if positive, dead-letters a message that fails on its
	// MaxReceives-th delivery (for queues without a server-side redrive
	// policy; with one, leave it zero and let the queue move it).
	MaxReceives int
	// DeadLetter receives messages that are given up on (permanent errors,
	// MaxReceives reached); the message is acknowledged only if it returns
	// nil. Nil means log and drop.
	DeadLetter func(ctx context.Context, d Delivery, cause error) error
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DrainStats count what a Drain did.
type DrainStats struct {
	Received     int // deliveries, duplicates included
	Succeeded    int // handled and acknowledged
	Failed       int // left for redelivery
	DeadLettered int // given up on and acknowledged
}

// Drain receives and handles messages until a Receive returns none or ctx
// ends. Each message is acknowledged if h succeeds; a failure is left to come
// back after its visibility timeout (or RetryDelay), except that a permanent
// failure, or one on the MaxReceives-th delivery, goes to DeadLetter and is
// acknowledged. Failed messages hidden by their visibility timeout do not
// keep Drain going. Drain returns ctx's error if ctx ended (a message whose
// handler finished is still acknowledged), and stops at the first Receive,
// Ack or Nack error.
func Drain(ctx context.Context, q Queue, h Handler, opts DrainOptions) (DrainStats, error) {
	var st DrainStats
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	batch := opts.BatchSize
	if batch <= 0 || batch > MaxBatchMessages {
		batch = MaxBatchMessages
	}
	for {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("drain: %w", err)
		}
		ds, err := q.Receive(ctx, batch, opts.Visibility)
		if err != nil {
			return st, fmt.Errorf("drain: %w", err)
		}
		if len(ds) == 0 {
			return st, nil
		}
		st.Received += len(ds)
		for _, d := range ds {
			if err := ctx.Err(); err != nil {
				// Not handled: it comes back after its visibility timeout.
				return st, fmt.Errorf("drain: %w", err)
			}
			herr := h(ctx, d.Body)
			if herr == nil {
				if err := ack(ctx, q, d); err != nil {
					return st, fmt.Errorf("drain: ack message %s: %w", d.ID, err)
				}
				st.Succeeded++
				continue
			}
			attrs := []any{"message_id", d.ID, "receive_count", d.ReceiveCount, "err", herr}
			giveUp := errors.Is(herr, ErrPermanent) ||
				(opts.MaxReceives > 0 && d.ReceiveCount >= opts.MaxReceives && ctx.Err() == nil)
			if giveUp {
				if opts.DeadLetter != nil {
					if err := opts.DeadLetter(ctx, d, herr); err != nil {
						log.ErrorContext(ctx, "queue: dead-lettering failed; message left for redelivery", append(attrs, "dead_letter_err", err)...)
						st.Failed++
						continue
					}
				}
				log.ErrorContext(ctx, "queue: giving up on message", append(attrs, "dead_lettered", opts.DeadLetter != nil)...)
				if err := ack(ctx, q, d); err != nil {
					return st, fmt.Errorf("drain: ack given-up message %s: %w", d.ID, err)
				}
				st.DeadLettered++
				continue
			}
			log.WarnContext(ctx, "queue: handler failed; message will be redelivered", attrs...)
			st.Failed++
			if opts.RetryDelay > 0 {
				if err := q.Nack(ctx, d, opts.RetryDelay); err != nil {
					return st, fmt.Errorf("drain: nack message %s: %w", d.ID, err)
				}
			}
		}
	}
}

// ackTimeout bounds an Ack made after ctx may have ended.
const ackTimeout = 10 * time.Second

// ack acknowledges a message whose handling is finished even if ctx ended
// meanwhile, so that the work is not redone.
func ack(ctx context.Context, q Queue, d Delivery) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	return q.Ack(actx, d)
}

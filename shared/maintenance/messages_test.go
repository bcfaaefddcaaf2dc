package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// TestCleanupMessages: duplicated and reordered deliveries give the same
// result as ordered ones; bad messages fail permanently and delete nothing;
// a tagged version inside a range keeps its manifest and files.
func TestCleanupMessages(t *testing.T) {
	ctx := context.Background()
	p := crashPolicy()
	h := buildHistory(t, p).withCleanupPending(t, p)
	run := func(qopts queue.EmbeddedOptions) (*env, map[string]int64) {
		dir := filepath.Join(t.TempDir(), "s")
		copyDir(t, h.dir, dir)
		e := newEnv(t, dir, p, qopts)
		e.clock.Advance(2 * time.Hour)
		send(t, e.q, h.bodies)
		e.drain(t)
		if dl := e.q.DeadLetters(); len(dl) > 0 {
			t.Fatalf("dead letters: %d", len(dl))
		}
		return e, listing(t, e.disk, "")
	}
	_, ordered := run(queue.EmbeddedOptions{})
	for seed := range uint64(4) {
		e, got := run(queue.EmbeddedOptions{DuplicateEvery: 2 + int(seed%2), Shuffle: rand.New(rand.NewPCG(seed, 1))})
		if err := sameListing(ordered, got); err != nil {
			t.Fatalf("seed %d: duplicated/shuffled delivery: %v", seed, err)
		}
		h.verify(t, e, fmt.Sprintf("seed %d", seed))
	}

	// Bad messages, on a copy with the cleanup still pending.
	dir := filepath.Join(t.TempDir(), "bad")
	copyDir(t, h.dir, dir)
	e := newEnv(t, dir, p, queue.EmbeddedOptions{})
	e.clock.Advance(2 * time.Hour)
	tb := e.open(t)
	floor, err := tb.Floor(ctx)
	if err != nil || floor < 5 {
		t.Fatalf("floor %d %v", floor, err)
	}
	if h.tagged >= floor {
		t.Fatalf("tagged version %d not below floor %d", h.tagged, floor)
	}
	msg := func(m maintenance.RangeMessage) []byte { return m.Encode() }
	root := e.ref.Root
	cases := []struct {
		name string
		body []byte
		want error
	}{
		{"above floor", msg(maintenance.RangeMessage{V: 1, Table: tblName, Root: root, From: floor - 2, To: floor}), maintenance.ErrAboveFloor},
		{"far above floor", msg(maintenance.RangeMessage{V: 1, Table: tblName, Root: root, From: floor + 5, To: floor + 50}), maintenance.ErrAboveFloor},
		{"unknown table", msg(maintenance.RangeMessage{V: 1, Table: "nope", Root: root, From: 1, To: 2}), maintenance.ErrUnknownTable},
		{"foreign root", msg(maintenance.RangeMessage{V: 1, Table: tblName, Root: "wh/other/", From: 1, To: 2}), maintenance.ErrForeignKey},
		{"root escapes", msg(maintenance.RangeMessage{V: 1, Table: tblName, Root: "wh/tbl/../x/", From: 1, To: 2}), maintenance.ErrForeignKey},
		{"malformed", []byte(`{"v":1,"table":`), maintenance.ErrInvalidMessage},
		{"not json", []byte(`hello`), maintenance.ErrInvalidMessage},
		{"unknown field", []byte(`{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":2,"prefix":"wh/"}`), maintenance.ErrInvalidMessage},
		{"trailing data", []byte(`{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":2}{}`), maintenance.ErrInvalidMessage},
		{"negative", []byte(`{"v":1,"table":"tbl","root":"wh/tbl/","from":-1,"to":2}`), maintenance.ErrInvalidMessage},
		{"huge range", []byte(`{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":18446744073709551615}`), maintenance.ErrInvalidMessage},
		{"reversed", []byte(`{"v":1,"table":"tbl","root":"wh/tbl/","from":5,"to":2}`), maintenance.ErrInvalidMessage},
		{"from zero", []byte(`{"v":1,"table":"tbl","root":"wh/tbl/","from":0,"to":2}`), maintenance.ErrInvalidMessage},
		{"bad version", []byte(`{"v":2,"table":"tbl","root":"wh/tbl/","from":1,"to":2}`), maintenance.ErrInvalidMessage},
		{"cursor outside", []byte(`{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":2,"cursor":9}`), maintenance.ErrInvalidMessage},
		{"oversized", []byte(`{"v":1,"table":"tbl","root":"` + strings.Repeat("x", 5000) + `","from":1,"to":2}`), maintenance.ErrInvalidMessage},
	}
	before := listing(t, e.disk, "")
	for _, c := range cases {
		_, err := e.clean.Clean(ctx, c.body)
		if !errors.Is(err, c.want) || !errors.Is(err, queue.ErrPermanent) {
			t.Errorf("%s: %v, want %v and queue.ErrPermanent", c.name, err, c.want)
		}
		if err := sameListing(before, listing(t, e.disk, "")); err != nil {
			t.Fatalf("%s deleted something: %v", c.name, err)
		}
	}
	// Through the queue they are dead-lettered at once, never retried.
	for _, c := range cases {
		send(t, e.q, [][]byte{c.body})
	}
	st := e.drain(t)
	if st.DeadLettered != len(cases) || st.Succeeded != 0 || e.q.Len() != 0 {
		t.Fatalf("drain of bad messages: %+v, %d left", st, e.q.Len())
	}
	if err := sameListing(before, listing(t, e.disk, "")); err != nil {
		t.Fatalf("bad messages deleted something: %v", err)
	}
	// The real messages still clean up, keeping the tagged version.
	send(t, e.q, h.bodies)
	e.drain(t)
	h.verify(t, e, "after bad messages")
}

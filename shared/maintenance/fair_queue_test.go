package maintenance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// Issue 33 point 3: cleanup ranges carry their table as message group, so
// on a fair queue one table's 5,000 queued ranges do not delay 50 other
// tables' single ranges: on the embedded queue (the local drain) the 50
// are received within 6 receives of 10 (docs/aws.md "Fair queues").
func TestRangeMessagesGroupedByTable(t *testing.T) {
	ctx := context.Background()
	q := queue.NewEmbedded(queue.EmbeddedOptions{})
	enq := maintenance.QueueEnqueuer{Q: q}
	var big [][]byte
	for i := range 5000 {
		big = append(big, maintenance.RangeMessage{V: 1, Table: "big", Root: "wh/big/", From: uint64(i*1000 + 1), To: uint64(i*1000 + 1000)}.Encode())
	}
	if err := enq.Send(ctx, big); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		name := fmt.Sprintf("small%02d", i)
		if err := enq.Send(ctx, [][]byte{maintenance.RangeMessage{V: 1, Table: name, Root: "wh/" + name + "/", From: 1, To: 5}.Encode()}); err != nil {
			t.Fatal(err)
		}
	}
	small := 0
	for r := 1; small < 50; r++ {
		ds, err := q.Receive(ctx, queue.MaxBatchMessages, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			m, err := maintenance.DecodeRangeMessage(d.Body)
			if err != nil {
				t.Fatal(err)
			}
			if m.Table != "big" {
				small++
			}
		}
		if small < 50 && r >= 6 {
			t.Fatalf("after %d receives only %d of the 50 small tables' ranges, want all within 6", r, small)
		}
	}
	if g := maintenance.RangeGroup([]byte(`not json`)); g != "" {
		t.Fatalf("a body that is not a range: group %q", g)
	}
}

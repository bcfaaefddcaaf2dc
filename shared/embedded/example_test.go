package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Using tablekeep from Go: create a table, upsert rows, read a key at the
// latest version and at an older one, then maintain it (compaction,
// pruning to the newest 10 versions, cleanup) in a local warehouse. On S3,
// objstore.Open("s3://bucket/prefix") gives the store; the maintenance of
// an S3 warehouse runs in the Lambda functions (docs/aws.md) or with
// `tablekeep maintain --warehouse s3://...` (docs/cli.md).
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tablekeep-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// A table under the warehouse directory, keyed by name.
	store, err := objstore.NewDisk(dir)
	if err != nil {
		log.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "uri", Type: arrow.BinaryTypes.String},
	}, nil)
	t, err := table.Create(ctx, store, "tables/rollouts", schema, "name", table.Options{})
	if err != nil {
		log.Fatal(err)
	}
	upsert := func(name, uri string) uint64 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		b.Field(0).(*array.StringBuilder).Append(name)
		b.Field(1).(*array.StringBuilder).Append(uri)
		rec := b.NewRecordBatch()
		defer rec.Release()
		res, err := t.Upsert(ctx, rec) // one commit: a new version
		if err != nil {
			log.Fatal(err)
		}
		return res.Version
	}
	first := upsert("alpha", "s3://rollouts/alpha-1")
	for i := 2; i <= 20; i++ {
		upsert("alpha", fmt.Sprintf("s3://rollouts/alpha-%d", i))
	}

	// Another process opens the same table and reads a key.
	t2, err := table.Open(ctx, store, "tables/rollouts", table.Options{})
	if err != nil {
		log.Fatal(err)
	}
	uri := func(s *table.Snapshot) string {
		rec, err := s.Get(ctx, "alpha")
		if err != nil {
			log.Fatal(err)
		}
		defer rec.Release()
		return rec.Column(1).(*array.String).Value(0)
	}
	latest, err := t2.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	old, err := t2.Checkout(ctx, first) // time travel
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("latest:", latest.Version(), uri(latest))
	fmt.Printf("version %d: %s\n", first, uri(old))

	// Maintenance in a local warehouse (lock files, an in-process queue).
	// Versions are kept for an hour after being superseded (the grace
	// window): this example acts as if two hours had passed. Real code
	// passes nil (the system clock).
	later := lock.AheadClock{Clock: clock.System(), Ahead: 2 * time.Hour}
	w, err := embedded.Open(ctx, dir, later, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Catalog.Register(ctx, "rollouts", "tables/rollouts", maintenance.Policy{KeepLast: 10}); err != nil {
		log.Fatal(err)
	}
	if _, err := w.Maintain(ctx, embedded.Options{}); err != nil {
		log.Fatal(err)
	}
	st, err := t2.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// A format-3 table (the default) keeps a small table's rows inline in
	// its manifest: no fragment until the inline bytes pass their bound.
	fmt.Printf("after maintenance: %d versions stored, %d fragments, %d row\n", st.Versions, st.Fragments, st.Rows)
	if _, err := t2.Checkout(ctx, first); errors.Is(err, table.ErrVersionPruned) {
		fmt.Printf("version %d: pruned\n", first)
	}
	// Output:
	// latest: 21 s3://rollouts/alpha-20
	// version 2: s3://rollouts/alpha-1
	// after maintenance: 10 versions stored, 0 fragments, 1 row
	// version 2: pruned
}

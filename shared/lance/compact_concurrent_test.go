package lance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestCompactWhileLanceDBWrites: a LanceDB process commits one-row
// upserts and deletes while Go compacts again and again. Every write the
// process saw acknowledged is in the latest version, no deleted row is
// back, the rows LanceDB held before are all there, and every version
// LanceDB lists still reads. For each pinned LanceDB release.
func TestCompactWhileLanceDBWrites(t *testing.T) {
	lancetest.ForEach(t, func(t *testing.T, r lancetest.Release) {
		db := releaseDB(r)
		dir, store := db.mixed(t, 8, "")
		compactWhileWriting(t, db, dir, store, "t.lance", nil)
	})
}

// TestCompactWhileLanceDBWritesOnS3: the same on versitygw, LanceDB
// writing straight to S3 (its conditional puts against tablekeep's).
func TestCompactWhileLanceDBWritesOnS3(t *testing.T) {
	s3 := testenv.S3Store(t)
	opts, _ := json.Marshal(map[string]string{
		"aws_access_key_id": os.Getenv("AWS_ACCESS_KEY_ID"), "aws_secret_access_key": os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"aws_endpoint": testenv.S3Endpoint(t), "aws_region": "us-east-1", "allow_http": "true",
	})
	env := []string{"LANCE_STORAGE_OPTIONS=" + string(opts)}
	uri := "s3://" + s3.Bucket() + "/lance"
	nodeEnv(t, env, nil, "mixed", uri, "t", "8")
	compactWhileWriting(t, lanceDB(), uri, s3, "lance/t.lance", env)
}

// compactWhileWriting runs the LanceDB writer on the dataset at dir (a
// directory or an s3:// URI; env passes LanceDB its storage options) while
// Go compacts root on store, then checks the latest version.
func compactWhileWriting(t *testing.T, db ldb, dir string, store objstore.Store, root string, env []string) {
	dump := func() dumped {
		var d dumped
		db.nodeEnv(t, env, &d, "dump", dir, "t")
		return d
	}
	before := dump()
	initial := before.Rows[strconv.FormatUint(before.Versions[len(before.Versions)-1], 10)]
	cmd := db.r.Command(t, env, "writer", dir, "t", "45")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	ctx := context.Background()
	ds := lance.Open(store, root)
	committed, conflicts, passes := 0, 0, 0
	var werr error
loop:
	for {
		select {
		case werr = <-waited:
			break loop
		default:
		}
		rep, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000})
		passes++
		if err != nil && !errors.Is(err, lance.ErrConflict) {
			t.Fatalf("pass %d: %v", passes, err)
		}
		committed += rep.Committed
		conflicts += rep.Conflicts
		time.Sleep(50 * time.Millisecond)
	}
	if werr != nil {
		t.Fatalf("writer: %v\n%s", werr, stderr.String())
	}
	if _, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000}); err != nil {
		t.Fatal(err)
	}
	var w struct {
		Upserted []int64 `json:"upserted"`
		Deleted  []int64 `json:"deleted"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &w); err != nil {
		t.Fatalf("writer said %q: %v", stdout.String(), err)
	}
	t.Logf("%d passes: %d groups committed, %d dropped for conflicts; the writer saw %d upserts and %d deletes acknowledged", passes, committed, conflicts, len(w.Upserted), len(w.Deleted))
	if committed < 2 {
		t.Fatalf("only %d groups committed while LanceDB wrote", committed)
	}
	after := dump()
	got := map[int64]bool{}
	for _, r := range after.Rows[strconv.FormatUint(after.Versions[len(after.Versions)-1], 10)] {
		if got[r.ID] {
			t.Fatalf("row %d twice in the latest version", r.ID)
		}
		got[r.ID] = true
	}
	for _, r := range initial {
		if !got[r.ID] {
			t.Fatalf("row %d (there before) lost", r.ID)
		}
	}
	for _, id := range w.Upserted {
		if !got[id] && !slices.Contains(w.Deleted, id) {
			t.Fatalf("acknowledged upsert of %d lost", id)
		}
	}
	for _, id := range w.Deleted {
		if got[id] {
			t.Fatalf("deleted row %d is back", id)
		}
	}
	var v verified
	db.nodeEnv(t, env, &v, "verify", dir, "t")
	if len(v.Bad) > 0 {
		t.Fatalf("LanceDB's index queries disagree with its scan: %v", v.Bad)
	}
}

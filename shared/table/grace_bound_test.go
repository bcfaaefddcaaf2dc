package table

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestWriterGraceBounded (issue 19 item 3): a writer grace above MaxGrace
// ("grace forever", near MaxInt64) is refused at Create with
// ErrInvalidGrace, and a manifest that stores one (written by a release
// before the bound) reads as MaxGrace, so its readers keep working;
// MaxGrace itself is stored and read back.
func TestWriterGraceBounded(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	for _, g := range []time.Duration{MaxGrace + 1, math.MaxInt64 - 10*time.Second, math.MaxInt64} {
		if _, err := Create(ctx, st, "t", regSchema, "name", Options{Grace: g}); !errors.Is(err, ErrInvalidGrace) {
			t.Fatalf("Create with grace %d: %v, want ErrInvalidGrace", g, err)
		}
	}
	if vs, _ := st.List(ctx, objstore.ListOptions{Prefix: "t/"}); len(vs.Objects) != 0 {
		t.Fatalf("refused Create wrote %d objects", len(vs.Objects))
	}
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{Grace: MaxGrace}))
	if g := must(Open(ctx, st, "t", Options{})).WriterGrace(); g != MaxGrace {
		t.Fatalf("stored MaxGrace, read %s", g)
	}
	m := *tbl.Cached()
	for _, g := range []time.Duration{MaxGrace + 1, math.MaxInt64} {
		m.WriterGrace = g
		if d, err := decodeManifest("k", encodeManifest(&m)); err != nil || d.WriterGrace != MaxGrace {
			t.Fatalf("manifest with writer grace %d: %v, want it read as MaxGrace", g, err)
		}
	}

	m.WriterGrace = MaxGrace
	if d, err := decodeManifest("k", encodeManifest(&m)); err != nil || d.WriterGrace != MaxGrace {
		t.Fatalf("manifest with writer grace MaxGrace: %v", err)
	}
}

// TestRetentionGraceSaturates: R = max(min(P, MaxGrace), W) +
// SafetyMargin never wraps around, whatever P, and is never shorter than
// W + SafetyMargin; SatAdd saturates at both ends.
func TestRetentionGraceSaturates(t *testing.T) {
	for _, c := range []struct{ p, w, want time.Duration }{
		{time.Hour, time.Hour, time.Hour + SafetyMargin},
		{2 * time.Hour, time.Hour, 2*time.Hour + SafetyMargin},
		{time.Hour, 3 * time.Hour, 3*time.Hour + SafetyMargin},
		{MaxGrace, time.Hour, MaxGrace + SafetyMargin},
		{math.MaxInt64 - 10*time.Second, time.Hour, MaxGrace + SafetyMargin}, // within 45 s of the limit
		{math.MaxInt64, MaxGrace, MaxGrace + SafetyMargin},
		{time.Hour, math.MaxInt64, math.MaxInt64}, // cannot be decoded; saturates
	} {
		if got := RetentionGrace(c.p, c.w); got != c.want {
			t.Errorf("RetentionGrace(%d, %d) = %d, want %d", c.p, c.w, got, c.want)
		}
	}
	for _, c := range []struct{ a, b, want time.Duration }{
		{1, 2, 3},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 10*time.Second, SafetyMargin, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
	} {
		if got := SatAdd(c.a, c.b); got != c.want {
			t.Errorf("SatAdd(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestCommitDurationBudget (issue 19 item 8): the client's bound on a
// manifest write plus the store's allowance fit in MaxCommitDuration,
// which SafetyMargin counts once beside three clock skews.
func TestCommitDurationBudget(t *testing.T) {
	if ManifestPutTimeout <= 0 || StoreApplyAllowance <= 0 || ManifestPutTimeout+StoreApplyAllowance > MaxCommitDuration {
		t.Fatalf("ManifestPutTimeout %s + StoreApplyAllowance %s > MaxCommitDuration %s", ManifestPutTimeout, StoreApplyAllowance, MaxCommitDuration)
	}
	if SafetyMargin != MaxCommitDuration+3*MaxClockSkew {
		t.Fatalf("SafetyMargin %s", SafetyMargin)
	}
}

// TestLegacyFloorBodies pins docs/format.md 2.4 on the legacy floor
// object's body (issue 19 item 9): {} and {"floor": null} mean 0, unknown
// fields are ignored, anything else that is not {"floor": uint64} is
// ErrCorruptObject.
func TestLegacyFloorBodies(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{}))
	for body, want := range map[string]uint64{`{}`: 0, `{"floor": null}`: 0, `{"floor": 0}`: 0, `{"floor": 7, "x": 1}`: 7} {
		if err := st.Put(ctx, "t/"+legacyFloorKey, []byte(body)); err != nil {
			t.Fatal(err)
		}
		if f, err := tbl.Floor(ctx); err != nil || f != want {
			t.Errorf("legacy %s: floor %d, %v; want %d", body, f, err, want)
		}
	}
	for _, body := range []string{`{"floor": -1}`, `{"floor": 1.5}`, `{"floor": "3"}`, `[]`, `{"floor": 3} x`, `{"floor": 18446744073709551616}`} {
		if err := st.Put(ctx, "t/"+legacyFloorKey, []byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Floor(ctx); !errors.Is(err, ErrCorruptObject) {
			t.Errorf("legacy %s: %v, want ErrCorruptObject", body, err)
		}
	}
}

// TestCommitBackoffSaturates: a commit's conflict backoff,
// BackoffBase x 2^min(attempt-1, 16) capped at BackoffMax, saturates
// instead of wrapping: a large BackoffBase once made it negative, and the
// jitter draw panicked on the second conflict.
func TestCommitBackoffSaturates(t *testing.T) {
	ctx := context.Background()
	inner := testkit.DiskStore(t)
	f := objstore.NewFaulty(inner)
	var slept []time.Duration
	opts := Options{BackoffBase: 1 << 62, BackoffMax: math.MaxInt64, Clock: sleepRecorder{&slept}}
	tbl := must(Create(ctx, f, "t", regSchema, "name", opts))
	conflicts := 0
	f.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindPut && op.Conditional && strings.Contains(op.Key, versionsDir) && conflicts < 3 {
			conflicts++
			return objstore.ErrExists
		}
		return nil
	})
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("commit panicked on its backoff: %v", r)
			}
		}()
		must(tbl.Append(ctx, regBatch(row{"a", "1", 1})))
	}()
	if len(slept) != 3 {
		t.Fatalf("slept %v", slept)
	}
	for _, d := range slept {
		if d <= 0 {
			t.Fatalf("backoff %d", d)
		}
	}
	if SatShift(1<<62, 1) != math.MaxInt64 || SatShift(3, 2) != 12 || SatShift(1<<50, 16) != math.MaxInt64 || SatShift(-1, 3) != -1 {
		t.Fatal("SatShift")
	}
}

// sleepRecorder is the real clock's Now with a Sleep that records its
// durations and returns at once.
type sleepRecorder struct{ slept *[]time.Duration }

func (sleepRecorder) Now() time.Time { return time.Now() }

func (r sleepRecorder) Sleep(_ context.Context, d time.Duration) error {
	*r.slept = append(*r.slept, d)
	return nil
}

// TestStoredGraceAboveMaxGraceReadsAsMaxGrace (issue 29 item 8): the
// decoder clamps a stored writer grace above MaxGrace, up to the largest
// uvarint (2^64 - 1 ns, beyond what a Duration holds), to MaxGrace instead
// of refusing the manifest as corrupt (timing.go, format.md 4.4): a table
// written before the bound stays readable.
func TestStoredGraceAboveMaxGraceReadsAsMaxGrace(t *testing.T) {
	ctx := context.Background()
	tbl := must(Create(ctx, testkit.DiskStore(t), "t", regSchema, "name", Options{}))
	m := *tbl.Cached()
	m.WriterGrace = math.MaxInt64
	enc := encodeManifest(&m)
	body := enc[:len(enc)-4]
	old := binary.AppendUvarint(nil, math.MaxInt64)
	if strings.Count(string(body), string(old)) != 1 {
		t.Fatal("the stored grace is not found once in the encoding")
	}
	body = []byte(strings.Replace(string(body), string(old), string(binary.AppendUvarint(nil, math.MaxUint64)), 1))
	d, err := decodeManifest("k", seal(body))
	if err != nil {
		t.Fatalf("manifest with writer grace 2^64 - 1 ns refused: %v; want it read as MaxGrace", err)
	}
	if d.WriterGrace != MaxGrace {
		t.Fatalf("manifest with writer grace 2^64 - 1 ns: grace %s, want MaxGrace", d.WriterGrace)
	}
}

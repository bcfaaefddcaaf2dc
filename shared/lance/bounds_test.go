package lance_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/table"
)

// footerAt is a 32-byte manifest file: 16 bytes of message area (a
// 12-byte Manifest message at 0 whose body is body, zero-padded), then the
// footer with the manifest position pos.
func footerAt(pos uint64, body []byte) []byte {
	if len(body) > 12 {
		panic("body too long")
	}
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	out = append(out, body...)
	out = append(out, make([]byte, 16-len(out))...)
	out = binary.LittleEndian.AppendUint64(out, pos)
	out = append(out, 0, 0, 2, 0)
	return append(out, "LANC"...)
}

// offsetCases are manifests whose offsets lie near the integer limits:
// the footer's manifest position, and a Manifest message's index_section
// (field 6) and transaction_section (field 21), each at MaxInt64 - k for
// k in 0..4, at MaxUint64 - k, and at 2^63 (negative as an int64).
func offsetCases() map[string][]byte {
	out := map[string][]byte{}
	for _, base := range []uint64{math.MaxInt64, math.MaxUint64, 1 << 63, 1<<32 - 1} {
		for k := range uint64(5) {
			p := base - k
			if base == 1<<63 {
				p = base + k
			}
			out["footer "+u64(p)] = footerAt(p, nil)
			out["index_section "+u64(p)] = footerAt(0, protowire.AppendVarint(protowire.AppendTag(nil, 6, protowire.VarintType), p))
			out["transaction_section "+u64(p)] = footerAt(0, protowire.AppendVarint(protowire.AppendTag(nil, 21, protowire.VarintType), p))
		}
	}
	// A message length that overruns: the message at 0 claims 2^32-1 bytes.
	b := footerAt(0, nil)
	binary.LittleEndian.PutUint32(b, math.MaxUint32)
	out["length 2^32-1"] = b
	return out
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// TestManifestOffsetsNearLimits (issue 19 item 4): a manifest whose
// footer position, index_section or transaction_section lies within 4 of
// MaxInt64 (or anywhere the int64 sum wraps) is ErrCorrupt, never a panic;
// an index or transaction section that cannot be an int64 position is
// corrupt too, never taken as absent (an index section skipped would hide
// the index directories the version references from the cleaner).
func TestManifestOffsetsNearLimits(t *testing.T) {
	for name, b := range offsetCases() {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panic: %v", name, r)
				}
			}()
			m, err := lance.DecodeManifest(name, b)
			if !errors.Is(err, lance.ErrCorrupt) {
				t.Errorf("%s: %+v, %v; want ErrCorrupt", name, m, err)
			}
		}()
	}
}

// TestLanceGraceSaturates (issue 19 item 3): a Lance dataset's retention
// and sweep graces never wrap around for a policy grace near MaxInt64.
func TestLanceGraceSaturates(t *testing.T) {
	s := lance.NewSource(nil, "d/")
	for _, pg := range []time.Duration{table.MaxGrace, math.MaxInt64 - 10*time.Second, math.MaxInt64} {
		if g := s.Grace(pg); g != table.MaxGrace+table.SafetyMargin {
			t.Errorf("Grace(%d) = %d, want MaxGrace + SafetyMargin", pg, g)
		}
		if g := s.SweepGrace(pg); g != table.MaxGrace+table.SafetyMargin {
			t.Errorf("SweepGrace(%d) = %d, want MaxGrace + SafetyMargin", pg, g)
		}
	}
	if g := s.Grace(time.Hour); g != time.Hour+table.SafetyMargin {
		t.Errorf("Grace(1h) = %s", g)
	}
}

// TestManifestTimestampBounded: a Manifest timestamp whose nanoseconds
// since the epoch do not fit an int64 (seconds near the integer limits,
// negative as the proto's int64) or whose nanos field is not in
// [0, 1e9) is ErrCorrupt: the version's time decides when it may be
// pruned, and a wrapped time once read as long past.
func TestManifestTimestampBounded(t *testing.T) {
	ts := func(sec, nanos uint64) []byte {
		msg := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), sec)
		msg = append(msg, protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), nanos)...)
		return manifestFile(append(varintField(3, 5), bytesField(7, msg)...))
	}
	ok, err := lance.DecodeManifest("ok", ts(1767225600, 5))
	if err != nil || !ok.Timestamp.Equal(time.Unix(1767225600, 5)) {
		t.Fatalf("valid timestamp: %v %v", ok, err)
	}
	for name, b := range map[string][]byte{
		"seconds MaxInt64":   ts(math.MaxInt64, 0),
		"seconds MaxUint64":  ts(math.MaxUint64, 0), // -1 as an int64: 1969, fine, but the nanos below
		"seconds 2^40":       ts(1<<40, 0),
		"seconds -2^40":      ts(uint64(1<<64-1<<40), 0),
		"nanos 1e9":          ts(1767225600, 1e9),
		"nanos negative":     ts(1767225600, math.MaxUint64),
		"nanos beyond int32": ts(1767225600, 1<<33),
	} {
		if name == "seconds MaxUint64" {
			if _, err := lance.DecodeManifest(name, b); err != nil {
				t.Errorf("%s: %v, want accepted (1969-12-31T23:59:59Z)", name, err)
			}
			continue
		}
		if _, err := lance.DecodeManifest(name, b); !errors.Is(err, lance.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

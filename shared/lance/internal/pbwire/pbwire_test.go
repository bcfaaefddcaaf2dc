package pbwire

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestWalk(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 300)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("ab"))
	b = protowire.AppendTag(b, 3, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 7)
	b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 1<<40)
	var got []uint64
	if err := Walk(b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		got = append(got, uint64(num), u+uint64(len(v)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 300, 2, 2, 3, 7, 4, 1 << 40}; len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	stop := errors.New("stop")
	if err := Walk(b, func(protowire.Number, protowire.Type, []byte, uint64) error { return stop }); err != stop {
		t.Fatalf("fn's error: %v", err)
	}
	for name, bad := range map[string][]byte{
		"bad tag":      {0x80},
		"wire type 3":  protowire.AppendTag(nil, 5, protowire.StartGroupType),
		"truncated":    append(protowire.AppendTag(nil, 2, protowire.BytesType), 5, 'a'),
		"varint trunc": append(protowire.AppendTag(nil, 1, protowire.VarintType), 0x80),
	} {
		var pe *Error
		if err := Walk(bad, func(protowire.Number, protowire.Type, []byte, uint64) error { return nil }); !errors.As(err, &pe) {
			t.Fatalf("%s: %v, want *Error", name, err)
		}
	}
	if s := (&Error{Field: 3, Msg: "truncated"}).In("Manifest"); s != "Manifest field 3: truncated" {
		t.Fatalf("In: %q", s)
	}
}

package pbwire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Error is a malformed message: a bad tag, an unknown wire type (groups
// included), or a truncated field.
type Error struct {
	Field protowire.Number // 0 for a bad tag
	Msg   string           // "bad tag", "wire type N", "truncated"
}

func (e *Error) Error() string { return e.In("message") }

// In describes the error in the message called what: "what: bad tag",
// "what field 3: truncated".
func (e *Error) In(what string) string {
	if e.Field == 0 {
		return what + ": " + e.Msg
	}
	return fmt.Sprintf("%s field %d: %s", what, e.Field, e.Msg)
}

// Walk calls fn with each field of message b in order: its number, wire
// type, and its bytes (length-delimited) or value (varint, fixed32,
// fixed64). It stops at fn's first error and returns it; a malformed
// message is an *Error.
func Walk(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return &Error{Msg: "bad tag"}
		}
		b = b[n:]
		var v []byte
		var u uint64
		switch typ {
		case protowire.VarintType:
			u, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			u = uint64(x)
		case protowire.Fixed64Type:
			u, n = protowire.ConsumeFixed64(b)
		default:
			return &Error{Field: num, Msg: fmt.Sprintf("wire type %d", typ)}
		}
		if n < 0 {
			return &Error{Field: num, Msg: "truncated"}
		}
		b = b[n:]
		if err := fn(num, typ, v, u); err != nil {
			return err
		}
	}
	return nil
}

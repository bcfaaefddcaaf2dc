// Package pbwire walks protobuf messages field by field for the Lance
// readers (manifests, data-file containers, page encodings), which read
// Lance's protobufs with protowire instead of generated code so that every
// bound is checked and unknown fields can be kept byte for byte. It holds
// the one walker they share; each reader wraps its *Error in its own
// corrupt-object error.
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the field
// walker and its *Error; no Lance semantics. It must not import any
// tablekeep package.
package pbwire

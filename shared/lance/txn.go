package lance

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// rewriteGroupTxn is one RewriteGroup of a Rewrite transaction, raw.
type rewriteGroupTxn struct {
	old, new [][]byte // DataFragment messages
}

// encodeRewrite encodes a Transaction{read_version, uuid, rewrite{groups}}
// (transaction.proto): what a Lance writer rebasing across this version
// reads to learn which fragments it rewrote.
func encodeRewrite(readVersion uint64, uuid string, groups []rewriteGroupTxn) []byte {
	var rw []byte
	for _, g := range groups {
		var gb []byte
		for _, f := range g.old {
			gb = protowire.AppendTag(gb, 1, protowire.BytesType)
			gb = protowire.AppendBytes(gb, f)
		}
		for _, f := range g.new {
			gb = protowire.AppendTag(gb, 2, protowire.BytesType)
			gb = protowire.AppendBytes(gb, f)
		}
		rw = protowire.AppendTag(rw, 3, protowire.BytesType)
		rw = protowire.AppendBytes(rw, gb)
	}
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.VarintType)
	out = protowire.AppendVarint(out, readVersion)
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendString(out, uuid)
	out = protowire.AppendTag(out, OpRewrite, protowire.BytesType)
	return protowire.AppendBytes(out, rw)
}

// txnEffect is what a committed transaction means for a rewrite planned
// before it.
type txnEffect struct {
	op int
	// all: the transaction conflicts with every rewrite (it replaced or
	// restored the dataset, or changed its schema or data files in a way
	// the rebase does not follow).
	all bool
	// touched are the fragments it modified or removed.
	touched map[uint64]bool
	// deletesOnly: a Delete or Update, which may only have added deletion
	// vectors to the fragments it touched (checked fragment by fragment on
	// the manifest) or removed them whole (removed).
	deletesOnly bool
	removed     map[uint64]bool
}

// Operations a rewrite commutes with, besides those touching fragments.
const (
	opProject         = 109
	opUpdateConfig    = 110
	opDataReplacement = 111
)

// decodeTxnEffect reads a serialized Transaction: Append, ReserveFragments,
// UpdateConfig and CreateIndex commute (the indices are checked again on
// the latest manifest); Delete, Update, Rewrite and DataReplacement touch
// the fragments they name; everything else (Overwrite, Restore, Merge,
// Project, Clone, the MemWAL and base-path operations, an unknown one or
// none) conflicts with every group.
func decodeTxnEffect(key string, b []byte) (txnEffect, error) {
	e := txnEffect{touched: map[uint64]bool{}, removed: map[uint64]bool{}}
	var body []byte
	err := fields(key, "Transaction", b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if num >= 100 && num < 200 {
			e.op, body = int(num), v
		}
		return nil
	})
	if err != nil {
		return e, err
	}
	fragID := func(v []byte) error {
		return fields(key, "DataFragment", v, func(n protowire.Number, _ protowire.Type, _ []byte, u uint64) error {
			if n == 1 {
				e.touched[u] = true
			}
			return nil
		})
	}
	ids := func(typ protowire.Type, v []byte, u uint64) error {
		return addIDs(key, e.touched, e.removed, typ, v, u)
	}
	switch e.op {
	case OpAppend, OpReserveFragments, opUpdateConfig, OpCreateIndex:
		return e, nil
	case OpDelete:
		e.deletesOnly = true
		return e, fields(key, "Delete", body, func(n protowire.Number, typ protowire.Type, v []byte, u uint64) error {
			switch n {
			case 1:
				return fragID(v)
			case 2:
				return ids(typ, v, u)
			}
			return nil
		})
	case OpUpdate:
		e.deletesOnly = true
		return e, fields(key, "Update", body, func(n protowire.Number, typ protowire.Type, v []byte, u uint64) error {
			switch n {
			case 1:
				return ids(typ, v, u)
			case 2:
				return fragID(v)
			}
			return nil
		})
	case OpRewrite:
		return e, fields(key, "Rewrite", body, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
			switch n {
			case 1:
				return fragID(v)
			case 3:
				return fields(key, "RewriteGroup", v, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
					if n == 1 {
						return fragID(v)
					}
					return nil
				})
			}
			return nil
		})
	case opDataReplacement:
		return e, fields(key, "DataReplacement", body, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
			if n != 1 {
				return nil
			}
			return fields(key, "DataReplacementGroup", v, func(n protowire.Number, _ protowire.Type, _ []byte, u uint64) error {
				if n == 1 {
					e.touched[u] = true
				}
				return nil
			})
		})
	default:
		e.all = true
		return e, nil
	}
}

// addIDs adds a repeated uint64 field (packed or not) to both sets.
func addIDs(key string, a, b map[uint64]bool, typ protowire.Type, v []byte, u uint64) error {
	var xs []uint64
	if typ == protowire.VarintType {
		xs = []uint64{u}
	} else {
		for len(v) > 0 {
			x, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return corrupt(key, "packed fragment ids")
			}
			xs, v = append(xs, x), v[n:]
		}
	}
	for _, x := range xs {
		a[x], b[x] = true, true
	}
	return nil
}

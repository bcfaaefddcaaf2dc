package table

import (
	"bytes"

	"github.com/apache/arrow-go/v18/arrow"
)

// Predicate selects rows by their key. Build one with KeyRange or KeyPrefix;
// Delete builds a key set.
type Predicate interface {
	keyPredicate
}

type keyPredicate interface {
	// mayMatch reports whether a fragment with these key bounds may hold a match.
	mayMatch(min, max []byte) bool
	match(key []byte) bool
}

type keySet struct {
	keys     map[string]struct{}
	min, max []byte
}

func newKeySet(keys [][]byte) *keySet {
	s := &keySet{keys: make(map[string]struct{}, len(keys))}
	for _, k := range keys {
		s.keys[string(k)] = struct{}{}
	}
	s.min, s.max = keyBounds(keys)
	return s
}

func (s *keySet) mayMatch(lo, hi []byte) bool {
	if len(s.keys) == 0 || bytes.Compare(hi, s.min) < 0 || bytes.Compare(lo, s.max) > 0 {
		return false
	}
	if len(s.keys) <= 64 {
		for k := range s.keys {
			if k >= string(lo) && k <= string(hi) {
				return true
			}
		}
		return false
	}
	return true
}

func (s *keySet) match(k []byte) bool { _, ok := s.keys[string(k)]; return ok }

type keyRange struct{ lo, hi []byte } // [lo, hi); nil = unbounded

func (r keyRange) mayMatch(min, max []byte) bool {
	if r.lo != nil && bytes.Compare(max, r.lo) < 0 {
		return false
	}
	if r.hi != nil && bytes.Compare(min, r.hi) >= 0 {
		return false
	}
	return true
}

func (r keyRange) match(k []byte) bool {
	return (r.lo == nil || bytes.Compare(k, r.lo) >= 0) && (r.hi == nil || bytes.Compare(k, r.hi) < 0)
}

// KeyRange matches keys in [lo, hi); a nil bound is unbounded. Values are
// string or int64, as the key column's type.
func KeyRange(keyType arrow.DataType, lo, hi any) (Predicate, error) {
	r := keyRange{}
	var err error
	if lo != nil {
		if r.lo, err = KeyOf(keyType, lo); err != nil {
			return nil, err
		}
	}
	if hi != nil {
		if r.hi, err = KeyOf(keyType, hi); err != nil {
			return nil, err
		}
	}
	return r, nil
}

type keyPrefix []byte

func (p keyPrefix) mayMatch(min, max []byte) bool {
	n := len(p)
	clip := func(b []byte) []byte {
		if len(b) > n {
			return b[:n]
		}
		return b
	}
	return bytes.Compare(clip(min), p) <= 0 && bytes.Compare(clip(max), p) >= 0
}

func (p keyPrefix) match(k []byte) bool { return bytes.HasPrefix(k, p) }

// KeyPrefix matches utf8 keys starting with prefix.
func KeyPrefix(prefix string) Predicate { return keyPrefix(prefix) }

package lance_test

import (
	"errors"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance"
)

// FuzzLanceManifest: DecodeManifest never panics on any input, and every
// key a manifest it accepts names is one the cleaner accepts (inside the
// dataset, of a kind Lance references): a crafted manifest cannot make a
// change record point anywhere else. Every error is ErrCorrupt or
// ErrUnsupported. The seeds include offsets near the integer limits
// (offsetCases, and testdata/fuzz/FuzzLanceManifest: issue 19 item 4).
func FuzzLanceManifest(f *testing.F) {
	dataFile := bytesField(1, []byte("abc.lance"))
	f.Add(manifestFile(append(varintField(3, 5), bytesField(2, fragmentMsg(bytesField(2, dataFile)))...)))
	f.Add(manifestFile(append(varintField(3, 7), bytesField(2, fragmentMsg(bytesField(2, dataFile), bytesField(3, varintField(2, 3))))...)))
	f.Add(manifestFile(append(varintField(3, 2), bytesField(12, []byte("1-abc.txn"))...)))
	f.Add([]byte("LANC"))
	for _, b := range offsetCases() {
		f.Add(b)
	}
	src := lance.NewSource(nil, "d/")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := lance.DecodeManifest("fuzz", b)
		if err != nil {
			if !errors.Is(err, lance.ErrCorrupt) && !errors.Is(err, lance.ErrUnsupported) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		for _, k := range m.Keys() {
			if err := src.CheckKey(k); err != nil {
				t.Fatalf("decoded key %q refused by the cleaner: %v", k, err)
			}
		}
	})
}

package table

import (
	"testing"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

func diskStore(t *testing.T) objstore.Store {
	t.Helper()
	st, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// must returns v, panicking (failing the test) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

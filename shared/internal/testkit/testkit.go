package testkit

import (
	"testing"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// DiskStore is a disk store in a fresh temporary directory of t.
func DiskStore(t testing.TB) objstore.Store {
	t.Helper()
	return DiskStoreAt(t, t.TempDir())
}

// DiskStoreAt is a disk store rooted at dir.
func DiskStoreAt(t testing.TB, dir string) objstore.Store {
	t.Helper()
	st, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

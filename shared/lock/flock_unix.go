//go:build unix

package lock

import (
	"os"
	"syscall"
)

// flock takes an exclusive flock(2) on f, retrying on EINTR; closing f drops it.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

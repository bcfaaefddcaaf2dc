//go:build !unix

package lock

import (
	"errors"
	"os"
)

func flock(*os.File) error { return errors.New("FileLocker needs flock(2), which this platform lacks") }

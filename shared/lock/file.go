package lock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// FileLocker keeps one JSON file per lock name in a directory: NAME.json
// holds the owner, the fencing token and the expiry (unix ms); it is never
// deleted, so tokens keep increasing across releases.
//
// Atomicity: every read-modify-write (acquire, take-over, renew, release)
// runs under an exclusive flock(2) on a sidecar file NAME.lk, and replaces
// NAME.json by writing a temporary file, fsyncing it and renaming it over the
// old one. flock rather than a create-if-absent lock file because the kernel
// drops it when the holder dies (a crashed process cannot wedge the lock),
// and because it excludes every open file description, so it serialises
// goroutines of one process as well as separate processes. The .lk files are
// never removed: unlinking a flock'ed file lets a later opener lock a
// different inode. Check only reads NAME.json, which rename keeps whole.
//
// The flock is held only for one small read and write, so waiting for it is
// not bounded by the context; waiting for a held lease is (see Acquire).
// flock is advisory and local: the directory must not be on a network file
// system shared between machines.
type FileLocker struct {
	dir   string
	clock clock.Clock
}

var _ Locker = (*FileLocker)(nil)

// NewFileLocker creates dir if needed and returns a locker keeping its files
// there.
func NewFileLocker(dir string, clock clock.Clock) (*FileLocker, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock: create directory: %w", err)
	}
	return &FileLocker{dir: dir, clock: clock}, nil
}

// base is the file name stem for a lock name: the name path-escaped (so
// "/" cannot leave the directory), or a hash of it if that is too long.
func base(name string) string {
	s := url.PathEscape(name)
	if len(s) > 200 {
		sum := sha256.Sum256([]byte(name))
		s = s[:100] + "-" + hex.EncodeToString(sum[:])
	}
	return s
}

func (f *FileLocker) path(name string) string { return filepath.Join(f.dir, base(name)+".json") }

func (f *FileLocker) read(name string) (*record, error) {
	data, err := os.ReadFile(f.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock %q: read: %w", name, err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("lock %q: decode %s: %w", name, f.path(name), err)
	}
	return &r, nil
}

// update runs fn on the current record under the name's flock and stores what
// it returns.
func (f *FileLocker) update(ctx context.Context, name string, fn func(cur *record, now time.Time) (*record, error)) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lock %q: %w", name, err)
	}
	lk, err := os.OpenFile(filepath.Join(f.dir, base(name)+".lk"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("lock %q: open: %w", name, err)
	}
	defer lk.Close() // closing drops the flock
	if err := flock(lk); err != nil {
		return fmt.Errorf("lock %q: flock: %w", name, err)
	}
	cur, err := f.read(name)
	if err != nil {
		return err
	}
	next, err := fn(cur, f.clock.Now())
	if err != nil {
		return err
	}
	return f.write(name, next)
}

func (f *FileLocker) write(name string, r *record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("lock %q: encode: %w", name, err)
	}
	tmp, err := os.CreateTemp(f.dir, base(name)+".tmp-*")
	if err != nil {
		return fmt.Errorf("lock %q: write: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path(name))
	}
	if err == nil {
		err = syncDir(f.dir)
	}
	if err != nil {
		return fmt.Errorf("lock %q: write: %w", name, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Acquire implements Locker.
func (f *FileLocker) Acquire(ctx context.Context, name string, opts AcquireOptions) (*Lease, error) {
	return acquireLoop(ctx, f.clock, name, opts, func(time.Time) (*Lease, error) {
		var l *Lease
		err := f.update(ctx, name, func(cur *record, now time.Time) (*record, error) {
			next, err := cur.acquire(name, opts, now)
			if err == nil {
				l = next.lease(opts.Lease)
			}
			return next, err
		})
		return l, err
	})
}

// Renew implements Locker.
func (f *FileLocker) Renew(ctx context.Context, l *Lease) (*Lease, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	var out *Lease
	err := f.update(ctx, l.Name, func(cur *record, now time.Time) (*record, error) {
		next, err := cur.renew(l, now)
		if err == nil {
			out = next.lease(l.Duration)
		}
		return next, err
	})
	return out, err
}

// Release implements Locker.
func (f *FileLocker) Release(ctx context.Context, l *Lease) error {
	if err := l.validate(); err != nil {
		return err
	}
	return f.update(ctx, l.Name, func(cur *record, _ time.Time) (*record, error) {
		return cur.release(l)
	})
}

// Check implements Locker.
func (f *FileLocker) Check(ctx context.Context, l *Lease) error {
	if err := l.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lock %q: %w", l.Name, err)
	}
	cur, err := f.read(l.Name)
	if err != nil {
		return err
	}
	return cur.check(l, f.clock.Now())
}

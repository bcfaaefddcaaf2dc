package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Disk is a Store over a local directory. Puts write a temporary file and
// rename it into place (atomic on POSIX); PutIfAbsent links the temporary
// file to its final name, which fails atomically if the name exists.
type Disk struct {
	root string
}

// tmpSuffix marks in-flight temporary files; List never returns them.
const tmpSuffix = ".tk-tmp"

// NewDisk returns a Store rooted at dir, creating it if needed.
func NewDisk(dir string) (*Disk, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("disk store %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("disk store %q: %w", dir, err)
	}
	return &Disk{root: abs}, nil
}

// Root is the directory the store is rooted at.
func (d *Disk) Root() string { return d.root }

func (d *Disk) path(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

func (d *Disk) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if isNotExist(err) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return b, nil
}

func (d *Disk) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	p, err := d.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	st, err := os.Stat(p)
	if isNotExist(err) || (err == nil && st.IsDir()) {
		return ObjectInfo{}, fmt.Errorf("head %s: %w", key, ErrNotExist)
	}
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("head %s: %w", key, err)
	}
	return ObjectInfo{Key: key, Size: st.Size(), LastModified: st.ModTime()}, nil
}

// isNotExist reports whether err means no object has the key: the path is
// missing, is a directory (a prefix of other keys), or runs through a file.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR)
}

// writeTemp writes data to a uniquely named temporary file beside p.
func writeTemp(p string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	tmp := p + "." + hex.EncodeToString(rnd[:]) + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func (d *Disk) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := d.path(key)
	if err != nil {
		return err
	}
	tmp, err := writeTemp(p, data)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func (d *Disk) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := d.path(key)
	if err != nil {
		return err
	}
	tmp, err := writeTemp(p, data)
	if err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	defer os.Remove(tmp)
	// link(2) fails with EEXIST if the name exists: the atomic compare-and-set.
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
		}
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	return nil
}

func (d *Disk) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	if err := ctx.Err(); err != nil {
		return ListPage{}, err
	}
	max := opts.MaxKeys
	if max <= 0 || max > MaxListKeys {
		max = MaxListKeys
	}
	// Walk only the deepest directory the prefix names.
	dirPart := ""
	if i := strings.LastIndex(opts.Prefix, "/"); i >= 0 {
		dirPart = opts.Prefix[:i]
	}
	base := d.root
	if dirPart != "" {
		if err := ValidateKey(dirPart); err != nil {
			return ListPage{}, err
		}
		base = filepath.Join(d.root, filepath.FromSlash(dirPart))
	}
	keys, flat, err := d.listFlat(base, dirPart, opts, max)
	if err != nil {
		return ListPage{}, fmt.Errorf("list %s: %w", opts.Prefix, err)
	}
	if !flat {
		if keys, err = d.listWalk(base, opts); err != nil {
			return ListPage{}, fmt.Errorf("list %s: %w", opts.Prefix, err)
		}
	}
	page := ListPage{}
	if len(keys) > max {
		keys = keys[:max]
		page.Truncated = true
	}
	page.Objects = make([]ObjectInfo, 0, len(keys))
	for _, k := range keys {
		st, err := os.Stat(filepath.Join(d.root, filepath.FromSlash(k)))
		if err != nil {
			continue // deleted since the walk
		}
		page.Objects = append(page.Objects, ObjectInfo{Key: k, Size: st.Size(), LastModified: st.ModTime()})
	}
	return page, nil
}

// listFlat lists a directory without subdirectories (every table prefix
// the maintenance lists: data/, _versions/, _changes/, ...) in one sorted
// ReadDir: its names sort as its keys do, so the page starts at a binary
// search for StartAfter and ends after max+1 keys, whatever the
// directory's size. flat is false (and nothing listed) when base has a
// subdirectory: listWalk sorts the whole tree then.
func (d *Disk) listFlat(base, dirPart string, opts ListOptions, max int) (keys []string, flat bool, err error) {
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, e := range entries {
		if e.IsDir() {
			return nil, false, nil
		}
	}
	keyDir := dirPart
	if keyDir != "" {
		keyDir += "/"
	}
	i := sort.Search(len(entries), func(i int) bool { return keyDir+entries[i].Name() > opts.StartAfter })
	for ; i < len(entries) && len(keys) <= max; i++ {
		key := keyDir + entries[i].Name()
		if strings.HasSuffix(key, tmpSuffix) || !strings.HasPrefix(key, opts.Prefix) {
			continue
		}
		keys = append(keys, key)
	}
	return keys, true, nil
}

// listWalk lists every key under base after StartAfter with the prefix,
// sorted.
func (d *Disk) listWalk(base string, opts ListOptions) ([]string, error) {
	var keys []string
	err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if strings.HasSuffix(key, tmpSuffix) || !strings.HasPrefix(key, opts.Prefix) || key <= opts.StartAfter {
			return nil
		}
		keys = append(keys, key)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

func (d *Disk) Delete(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(keys) > MaxDeleteKeys {
		return fmt.Errorf("delete %d keys: %w", len(keys), ErrTooManyKeys)
	}
	// Like S3: any invalid key rejects the whole request before it is made.
	for _, k := range keys {
		if err := ValidateKey(k); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	var failed []KeyError
	for _, k := range keys {
		p := filepath.Join(d.root, filepath.FromSlash(k))
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			failed = append(failed, KeyError{Key: k, Code: "RemoveFailed", Message: err.Error()})
		}
	}
	if len(failed) > 0 {
		return &DeleteError{Failed: failed}
	}
	return nil
}

// DirUsage counts the files under a local directory and their bytes: what a
// table costs on disk, for reports (the demo, the benchmarks).
func DirUsage(dir string) (files int, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		files++
		bytes += info.Size()
		return nil
	})
	return files, bytes, err
}

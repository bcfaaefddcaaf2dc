package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// memStore is an in-memory objstore.Store dated by a clock, for the fleet
// simulation (10,000 tables on a disk store would measure the disk). Keys
// are indexed by folder, so a List walks only the folder its prefix names,
// as the disk store does.
type memStore struct {
	mu   sync.RWMutex
	clk  clock.Clock
	objs map[string]memObj
	dirs map[string]*memDir
}

type memObj struct {
	data []byte
	mod  time.Time
}

type memDir struct {
	files map[string]struct{}
	subs  map[string]struct{}
}

var _ objstore.Store = (*memStore)(nil)

func newMemStore(clk clock.Clock) *memStore {
	return &memStore{clk: clk, objs: map[string]memObj{}, dirs: map[string]*memDir{}}
}

func dirOf(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[:i]
	}
	return ""
}

func (s *memStore) dir(d string) *memDir {
	md := s.dirs[d]
	if md == nil {
		md = &memDir{files: map[string]struct{}{}, subs: map[string]struct{}{}}
		s.dirs[d] = md
		if d != "" {
			s.dir(dirOf(d)).subs[d] = struct{}{}
		}
	}
	return md
}

func (s *memStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objs[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, objstore.ErrNotExist)
	}
	return append([]byte(nil), o.data...), nil
}

func (s *memStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objs[key]
	if !ok {
		return objstore.ObjectInfo{}, fmt.Errorf("head %s: %w", key, objstore.ErrNotExist)
	}
	return objstore.ObjectInfo{Key: key, Size: int64(len(o.data)), LastModified: o.mod}, nil
}

func (s *memStore) put(key string, data []byte, ifAbsent bool) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objs[key]; ok && ifAbsent {
		return fmt.Errorf("put %s: %w", key, objstore.ErrExists)
	}
	s.objs[key] = memObj{data: append([]byte(nil), data...), mod: s.clk.Now()}
	s.dir(dirOf(key)).files[key] = struct{}{}
	return nil
}

func (s *memStore) Put(ctx context.Context, key string, data []byte) error {
	return s.put(key, data, false)
}

func (s *memStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.put(key, data, true)
}

func (s *memStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	max := opts.MaxKeys
	if max <= 0 || max > objstore.MaxListKeys {
		max = objstore.MaxListKeys
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var keys []string
	var walk func(d string)
	walk = func(d string) {
		md := s.dirs[d]
		if md == nil {
			return
		}
		for k := range md.files {
			if strings.HasPrefix(k, opts.Prefix) && k > opts.StartAfter {
				keys = append(keys, k)
			}
		}
		for sub := range md.subs {
			if strings.HasPrefix(sub+"/", opts.Prefix) || strings.HasPrefix(opts.Prefix, sub+"/") {
				walk(sub)
			}
		}
	}
	walk(dirOf(opts.Prefix))
	sort.Strings(keys)
	var page objstore.ListPage
	if len(keys) > max {
		keys, page.Truncated = keys[:max], true
	}
	for _, k := range keys {
		o := s.objs[k]
		page.Objects = append(page.Objects, objstore.ObjectInfo{Key: k, Size: int64(len(o.data)), LastModified: o.mod})
	}
	return page, nil
}

func (s *memStore) Delete(ctx context.Context, keys []string) error {
	if len(keys) > objstore.MaxDeleteKeys {
		return objstore.ErrTooManyKeys
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.objs, k)
		if md := s.dirs[dirOf(k)]; md != nil {
			delete(md.files, k)
		}
	}
	return nil
}

package testkit

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// MemStore is an in-memory objstore.Store: no times (LastModified is
// zero; wrap it in fakeclock.NewStore for dated objects), no latency.
type MemStore struct {
	mu   sync.Mutex
	objs map[string][]byte
}

// NewMemStore is an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{objs: map[string][]byte{}} }

func (m *MemStore) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, objstore.ErrNotExist)
	}
	return b, nil
}

func (m *MemStore) Head(_ context.Context, key string) (objstore.ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return objstore.ObjectInfo{}, fmt.Errorf("head %s: %w", key, objstore.ErrNotExist)
	}
	return objstore.ObjectInfo{Key: key, Size: int64(len(b))}, nil
}

func (m *MemStore) Put(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = append([]byte(nil), data...)
	return nil
}

func (m *MemStore) PutIfAbsent(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok {
		return fmt.Errorf("put-if-absent %s: %w", key, objstore.ErrExists)
	}
	m.objs[key] = append([]byte(nil), data...)
	return nil
}

func (m *MemStore) List(_ context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	max := opts.MaxKeys
	if max <= 0 || max > objstore.MaxListKeys {
		max = objstore.MaxListKeys
	}
	var keys []string
	for k := range m.objs {
		if strings.HasPrefix(k, opts.Prefix) && k > opts.StartAfter {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	page := objstore.ListPage{}
	if len(keys) > max {
		keys, page.Truncated = keys[:max], true
	}
	for _, k := range keys {
		page.Objects = append(page.Objects, objstore.ObjectInfo{Key: k, Size: int64(len(m.objs[k]))})
	}
	return page, nil
}

func (m *MemStore) Delete(_ context.Context, keys []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.objs, k)
	}
	return nil
}

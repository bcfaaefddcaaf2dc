package table

import (
	"context"

	"github.com/tablekeep/tablekeep/shared/dataset"
)

// Stats reads the latest version and lists the stored manifests.
func (t *Table) Stats(ctx context.Context) (dataset.Stats, error) {
	m, err := t.Refresh(ctx)
	if err != nil {
		return dataset.Stats{}, err
	}
	vs, err := t.Versions(ctx)
	if err != nil {
		return dataset.Stats{}, err
	}
	s := StatsOf(m)
	s.Versions = len(vs)
	for _, v := range vs {
		s.ManifestBytes += v.ManifestBytes
		if v.Version == m.Version {
			s.LatestManifestBytes = v.ManifestBytes
		}
	}
	return s, nil
}

// StatsOf summarises one manifest without I/O (history fields left zero).
func StatsOf(m *Manifest) dataset.Stats {
	s := dataset.Stats{Version: m.Version, FormatVersion: m.FormatVersion(), Fragments: len(m.Fragments), InlineRows: uint64(len(m.Inline))}
	for _, f := range m.Fragments {
		s.Rows += f.LiveRows()
		s.DataBytes += f.Bytes
		s.DeletedRows += uint64(len(f.Inline)) // format 3: deleted in the manifest
		if f.Deletion != nil {
			s.DeletedRows += f.Deletion.Rows
			s.DeletionFiles++
		}
	}
	s.Rows += uint64(len(m.Inline)) // format 3: rows kept in the manifest
	return s
}

package table

import "context"

// Stats summarises a table's latest version and its stored history.
type Stats struct {
	Version             uint64 `json:"version"`
	Versions            int    `json:"versions"` // manifests stored
	Fragments           int    `json:"fragments"`
	Rows                uint64 `json:"rows"`
	DeletedRows         uint64 `json:"deleted_rows"` // rows masked by deletion vectors (and inline deletions) in the latest version
	DeletionFiles       int    `json:"deletion_files"`
	ManifestBytes       int64  `json:"manifest_bytes"` // all stored manifests
	LatestManifestBytes int64  `json:"latest_manifest_bytes"`
	DataBytes           uint64 `json:"data_bytes"` // data files the latest version references
}

// Stats reads the latest version and lists the stored manifests.
func (t *Table) Stats(ctx context.Context) (Stats, error) {
	m, err := t.Refresh(ctx)
	if err != nil {
		return Stats{}, err
	}
	vs, err := t.Versions(ctx)
	if err != nil {
		return Stats{}, err
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
func StatsOf(m *Manifest) Stats {
	s := Stats{Version: m.Version, Fragments: len(m.Fragments)}
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

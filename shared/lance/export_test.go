package lance

import (
	"context"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// SetLatestFlags rewrites the latest manifest of the dataset at root in
// place (tests only): its reader and writer feature flags, and, if
// fileVersion is not "", its default data file version (data_format,
// field 15: "lance", fileVersion), as a Lance 12 upgrade of a dataset to
// mixed file versions (flag 256) leaves it.
func SetLatestFlags(ctx context.Context, store objstore.Store, root string, reader, writer uint64, fileVersion string) error {
	ds := Open(store, root)
	last, err := ds.latestFile(ctx)
	if err != nil {
		return err
	}
	b, err := store.Get(ctx, last.Key)
	if err != nil {
		return err
	}
	rm, err := parseRawManifest(last.Key, b)
	if err != nil {
		return err
	}
	var fs []rawField
	for _, f := range rm.fields {
		switch f.num {
		case 9, 10:
			continue
		case 15:
			if fileVersion != "" {
				var df []byte
				df = protowire.AppendTag(df, 1, protowire.BytesType)
				df = protowire.AppendString(df, "lance")
				df = protowire.AppendTag(df, 2, protowire.BytesType)
				df = protowire.AppendString(df, fileVersion)
				f.v = df
			}
		}
		fs = append(fs, f)
	}
	rm.fields = append(fs, rawField{9, protowire.VarintType, nil, reader}, rawField{10, protowire.VarintType, nil, writer})
	frags := make([][]byte, len(rm.fragments))
	for i, f := range rm.fragments {
		frags[i] = f.raw
	}
	return store.Put(ctx, last.Key, rm.encode(nextManifest{
		Version: rm.m.Version, Timestamp: rm.m.Timestamp, Fragments: frags,
		MaxFragmentID: rm.maxFragmentID(), TransactionFile: rm.m.TransactionFile,
	}))
}

package table

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// A floor marker names the manifest it was raised at (docs/format.md 2.4):
// its version (the floor) and that manifest's stamp, what a listing of
// _versions/ says of it. A floor is trusted for deletion only when its
// marker's stamp is the stamp the manifest of its version is listed with:
// a table removed and created again at the root writes another manifest
// for that version, listed with another stamp. The legacy object and
// markers without a stamp (written by earlier releases) prove nothing.

// FloorStampAge is how old (by the store's time, against the writer's
// clock) a manifest must be before a marker names it: one second (the
// stamp's resolution) plus MaxClockSkew. A manifest of another history for
// the same version is written after this one was deleted, which is after
// the listing that saw it, so at least a second later: the stamps differ.
const FloorStampAge = time.Second + MaxClockSkew

// Stampable reports whether a marker may name a manifest the store dated
// modified, by a writer whose clock reads now: dated (not before the Unix
// epoch: a store without times gives none) and more than FloorStampAge old.
func Stampable(modified, now time.Time) bool {
	return modified.Unix() >= 0 && now.Sub(modified) > FloorStampAge
}

func (s ManifestStamp) valid() bool { return s.Size >= 0 && s.Unix >= 0 }

// ManifestStamp is what a listing (or a HEAD) says of a manifest: its
// size in bytes and its store time, in whole seconds since the Unix epoch
// (truncated: S3 dates objects to the second, in a LIST as in a HEAD).
type ManifestStamp struct {
	Size int64
	Unix int64
}

// StampOf is the stamp of the manifest o describes.
func StampOf(o objstore.ObjectInfo) ManifestStamp { return stampAt(o.Size, o.LastModified) }

func stampAt(size int64, t time.Time) ManifestStamp {
	return ManifestStamp{Size: size, Unix: t.Truncate(time.Second).Unix()}
}

// StampOfListed is the stamp of a manifest listed with that size and
// store time (a dataset.VersionInfo's ManifestBytes and Time).
func StampOfListed(size int64, modified time.Time) ManifestStamp { return stampAt(size, modified) }

func (s ManifestStamp) String() string {
	return fmt.Sprintf("%d bytes, %s", s.Size, time.Unix(s.Unix, 0).UTC().Format(time.RFC3339))
}

// stampedMarkerKey names floor f's marker raised at a manifest of stamp s:
// _refs/floor/{20 digits of 2^64-1-f}-{size}-{unix seconds}.
func stampedMarkerKey(f uint64, s ManifestStamp) string {
	return fmt.Sprintf("%s-%d-%d", floorMarkerKey(f), s.Size, s.Unix)
}

// floorMarker is one parsed marker name.
type floorMarker struct {
	floor   uint64
	stamp   ManifestStamp
	stamped bool
}

// parseMarkerName parses a key relative to the root as a floor marker,
// stamped or not (docs/format.md 2.4); ok is false for any other key.
func parseMarkerName(rel string) (floorMarker, bool) {
	name, ok := strings.CutPrefix(rel, floorDir)
	if !ok || len(name) < 20 {
		return floorMarker{}, false
	}
	f, ok := parseFloorMarker(floorDir + name[:20])
	if !ok {
		return floorMarker{}, false
	}
	if len(name) == 20 {
		return floorMarker{floor: f}, true
	}
	size, unix, ok := strings.Cut(strings.TrimPrefix(name[20:], "-"), "-")
	if !ok || name[20] != '-' {
		return floorMarker{}, false
	}
	sz, ok1 := canonicalDecimal(size)
	ts, ok2 := canonicalDecimal(unix)
	if !ok1 || !ok2 {
		return floorMarker{}, false
	}
	return floorMarker{floor: f, stamp: ManifestStamp{Size: sz, Unix: ts}, stamped: true}, true
}

// canonicalDecimal parses a non-negative int64 written in decimal without
// sign or leading zeros ("0" itself allowed).
func canonicalDecimal(s string) (int64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// FloorProof is a floor read judged against the manifests listed
// (FloorRead.Prove): the floor trusted for deletion, and what else was read.
type FloorProof struct {
	// Floor is the trusted floor: the highest marker's, when that marker
	// is stamped and its version's manifest is listed with that stamp; 0
	// (none: the planner recomputes it from the versions' own times)
	// otherwise.
	Floor uint64
	// Unproven is the highest floor read that is not trusted (the legacy
	// object, a marker without a stamp, a stamped marker whose manifest is
	// not listed), if above Floor; 0 otherwise. Readers still honour it.
	Unproven uint64
	// Other, if set, says why a floor read belongs to another history of
	// the root: the highest stamped marker's version is listed with
	// another stamp, or the highest unstamped marker above Floor is older
	// than its version's manifest by more than MaxClockSkew.
	Other string
}

// Listed looks up version v's manifest in a listing: its size and store
// time, and whether it is listed.
type Listed func(v uint64) (size int64, modified time.Time, ok bool)

// Prove judges the read against the manifests listed (docs/format.md 2.4,
// "Which floor is trusted"). It reads nothing: the planner's version
// listing, or the cleaner's HEAD of the one manifest StampedFloor names,
// answers listed.
func (r FloorRead) Prove(listed Listed) FloorProof {
	var p FloorProof
	var unstamped *objstore.ObjectInfo
	var unstampedFloor uint64
	stampedSeen := false
	for i, o := range r.markers { // highest first
		m, ok := parseMarkerName(o.Key[max(0, strings.LastIndex(o.Key, floorDir)):])
		if !ok {
			continue
		}
		if !m.stamped {
			if unstamped == nil {
				unstamped, unstampedFloor = &r.markers[i], m.floor
			}
			continue
		}
		if stampedSeen {
			continue
		}
		stampedSeen = true
		size, mod, ok := listed(m.floor)
		switch {
		case ok && stampAt(size, mod) == m.stamp:
			p.Floor = m.floor
		case ok:
			p.Other = fmt.Sprintf("its marker %s names a manifest of %s; version %d's manifest is listed with %s",
				o.Key, m.stamp, m.floor, stampAt(size, mod))
		default:
			p.Unproven = max(p.Unproven, m.floor)
		}
	}
	if unstamped != nil && unstampedFloor > p.Floor {
		p.Unproven = max(p.Unproven, unstampedFloor)
		if _, mod, ok := listed(unstampedFloor); ok && unstamped.LastModified.Before(mod.Add(-MaxClockSkew)) && p.Other == "" {
			p.Other = fmt.Sprintf("its marker %s, written %s, is older than version %d's manifest, written %s",
				unstamped.Key, unstamped.LastModified.UTC().Format(time.RFC3339), unstampedFloor, mod.UTC().Format(time.RFC3339))
		}
	}
	if r.legacy && r.legacyFloor > p.Floor {
		p.Unproven = max(p.Unproven, r.legacyFloor)
	}
	if p.Unproven <= p.Floor {
		p.Unproven = 0
	}
	return p
}

// StampedFloor is the highest stamped marker read: its floor and stamp (ok
// false: none). The cleaner HEADs that one manifest to Prove the read.
func (r FloorRead) StampedFloor() (uint64, ManifestStamp, bool) {
	for _, o := range r.markers {
		if m, ok := parseMarkerName(o.Key[max(0, strings.LastIndex(o.Key, floorDir)):]); ok && m.stamped {
			return m.floor, m.stamp, true
		}
	}
	return 0, ManifestStamp{}, false
}

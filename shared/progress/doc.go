// Package progress shows progress bars for long local operations, only
// when the output is a terminal: piped or redirected output stays quiet.
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the bar and its
// terminal check, and the bars a context carries to the named phases of a
// library call (phase.go); nothing else. It must not import any tablekeep
// package.
package progress

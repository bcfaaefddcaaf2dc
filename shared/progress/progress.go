package progress

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar is a progress display: Add after each item, Finish at the end.
type Bar interface {
	Add(int) error
	Finish() error
}

type none struct{}

func (none) Add(int) error { return nil }
func (none) Finish() error { return nil }

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a bar of total items (-1: unknown) on w, or a no-op bar if
// w is not a terminal.
func New(w io.Writer, desc string, total int) Bar {
	if !IsTerminal(w) {
		return none{}
	}
	return newBar(w, desc, total)
}

func newBar(w io.Writer, desc string, total int) Bar {
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		// Drawn at once: a long first step (a dry run reading 20,000
		// change records) shows the bar, not a blank terminal.
		progressbar.OptionSetRenderBlankState(true),
	)
}

// For returns a constructor of bars on w, or nil if w is not a terminal
// (callers then show nothing).
func For(w io.Writer) func(desc string, total int) Bar {
	if !IsTerminal(w) {
		return nil
	}
	return func(desc string, total int) Bar { return newBar(w, desc, total) }
}

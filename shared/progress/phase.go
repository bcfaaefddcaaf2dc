package progress

import "context"

// Func makes a bar of total items (-1: unknown) described by desc.
type Func func(desc string, total int) Bar

type phaseKey struct{}

// phases are the bars a context carries: where they are drawn, and the
// names of the steps the context is in ("reg: sweep: ").
type phases struct {
	bars   Func
	prefix string
}

// WithBars returns ctx carrying bars: the long phases of a library call
// made with it (Start) draw with them. A nil bars returns ctx unchanged.
func WithBars(ctx context.Context, bars Func) context.Context {
	if bars == nil {
		return ctx
	}
	return context.WithValue(ctx, phaseKey{}, phases{bars: bars})
}

// Named returns ctx inside the step name: the bars its phases start are
// described "name: phase" (nested: "table: step: phase"). Without bars it
// returns ctx unchanged.
func Named(ctx context.Context, name string) context.Context {
	p, ok := ctx.Value(phaseKey{}).(phases)
	if !ok {
		return ctx
	}
	p.prefix += name + ": "
	return context.WithValue(ctx, phaseKey{}, p)
}

// MinTicked is the smallest phase Start draws a bar for: shorter ones
// finish before a bar would be read.
const MinTicked = 100

// Start returns the bar of a phase of total items ("reading manifests",
// 20001), described by the step names of ctx, or a no-op bar when ctx
// carries no bars or the phase has fewer than MinTicked items. Add is safe
// from several goroutines.
func Start(ctx context.Context, phase string, total int) Bar {
	p, ok := ctx.Value(phaseKey{}).(phases)
	if !ok || total < MinTicked {
		return none{}
	}
	return p.bars(p.prefix+phase, total)
}

package maintenance

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/progress"
)

// DefaultConcurrency is how many object-store requests one maintenance
// step sends at once for one table (change records read by the sweep and
// by prune repair, versions --long, stats) unless WithConcurrency says
// otherwise. At S3's ~20 ms per GET it turns a chain of 1,000 reads from
// 20 s into ~1.3 s, far under S3's 5,500 GET/s per prefix.
const DefaultConcurrency = 16

type concurrencyKey struct{}

// WithConcurrency returns ctx carrying the number of requests maintenance
// steps run under it send at once for one table (n <= 0: the default; 1:
// serial, as before parallelism).
func WithConcurrency(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, concurrencyKey{}, n)
}

// Concurrency returns the limit WithConcurrency put in ctx, or
// DefaultConcurrency.
func Concurrency(ctx context.Context) int {
	if n, ok := ctx.Value(concurrencyKey{}).(int); ok && n > 0 {
		return n
	}
	return DefaultConcurrency
}

// inParallel runs fns at once (at most Concurrency(ctx)), each to its end,
// and returns the error of the first of them, in argument order, that
// failed: the same error a serial run of fns in order would have returned
// first, whatever order they finish in.
func inParallel(ctx context.Context, fns ...func(context.Context) error) error {
	errs := make([]error, len(fns))
	var g errgroup.Group
	g.SetLimit(Concurrency(ctx))
	for i, fn := range fns {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return nil
			}
			errs[i] = fn(ctx)
			return nil
		})
	}
	_ = g.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// forEach calls fn(ctx, i) for i in [0, n), at most Concurrency(ctx) at
// once; the first error cancels the rest and is returned. Callers store
// results by index, so outputs keep their order.
func forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	return forEachTick(ctx, "", n, fn)
}

// forEachTick is forEach as a named phase of the step ctx is in: with bars
// in ctx (progress.WithBars) a phase of many items ticks after each
// ("reg: sweep: reading manifests 12000/20000").
func forEachTick(ctx context.Context, phase string, n int, fn func(ctx context.Context, i int) error) error {
	total := n
	if phase == "" {
		total = 0 // untitled: no bar
	}
	bar := progress.Start(ctx, phase, total)
	defer func() { _ = bar.Finish() }()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Concurrency(ctx))
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			err := fn(gctx, i)
			_ = bar.Add(1)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

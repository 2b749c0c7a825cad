package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/edgesched/edgesched/sim"
)

// CompareConfig runs several policies over several seeds.
type CompareConfig struct {
	// Run is the per-run configuration; its Seed and Progress are replaced.
	// Its OnBind, when set, is called from several runs at once and must be
	// safe for concurrent use.
	Run   RunConfig
	Seeds []uint64
	// Parallel bounds concurrent runs; 0 means GOMAXPROCS. Decision
	// latencies are noisier when runs share cores.
	Parallel int
	// Progress, when set, is called from the runs' goroutines (serialised)
	// with the overall work done out of total, in permille per run.
	Progress func(done, total int64)
}

// Compare runs every factory on every seed and returns the results in
// factory-major, seed-minor order. The first error cancels the others.
func Compare(ctx context.Context, env *sim.Env, factories []sim.Factory, cfg CompareConfig) ([]*Result, error) {
	if len(factories) == 0 || len(cfg.Seeds) == 0 {
		return nil, fmt.Errorf("%w: compare needs at least one policy and one seed", sim.ErrInvalid)
	}
	if err := cfg.Run.Validate(); err != nil {
		return nil, err
	}
	par := cfg.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type job struct{ i, f, s int }
	n := len(factories) * len(cfg.Seeds)
	results := make([]*Result, n)
	jobs := make(chan job)
	var (
		mu       sync.Mutex
		firstErr error
		progress = make([]int64, n)
		total    = int64(n) * 1000
		done     int64
	)
	report := func(i int, d, t int64) {
		if cfg.Progress == nil || t <= 0 {
			return
		}
		pm := d * 1000 / t
		mu.Lock()
		defer mu.Unlock()
		done += pm - progress[i]
		progress[i] = pm
		cfg.Progress(done, total)
	}
	var wg sync.WaitGroup
	for range min(par, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				rc := cfg.Run
				rc.Seed = cfg.Seeds[j.s]
				rc.Progress = func(d, t int64) { report(j.i, d, t) }
				res, err := Run(ctx, env, factories[j.f], rc)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s seed %d: %w", factories[j.f].Name, rc.Seed, err)
					}
					mu.Unlock()
					cancel()
					continue
				}
				results[j.i] = res
				report(j.i, 1, 1)
			}
		}()
	}
feed:
	for f := range factories {
		for s := range cfg.Seeds {
			select {
			case jobs <- job{i: f*len(cfg.Seeds) + s, f: f, s: s}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return results, nil
}

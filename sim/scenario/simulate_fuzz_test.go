package scenario

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
)

// FuzzSimulate feeds whatever Parse accepts (kept small) to the engine in
// both modes: a run either completes with finite measures or refuses with
// sim.ErrInvalid; it never panics or hangs.
func FuzzSimulate(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(strings.NewReplacer("duration: 24h", "duration: 1h", "replicas: 2", "replicas: 0.3", "services: 12", "services: 3").Replace(loaded)))
	f.Add([]byte(minimal + "dependencies:\n  - {from: web, to: web, callsPerSecond: 1e9}\nnetwork: {interZoneMs: 1000000}\n"))
	f.Add([]byte(strings.Replace(minimal, "service: web}", "service: web, create: 10000000000, gpus: 0}", 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Parse(b, "fuzz.yaml", "")
		if err != nil || len(l.Workload.Pods) > 300 || len(l.Cluster.Nodes) > 50 {
			return
		}
		env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
		if err != nil {
			t.Fatalf("Parse accepted a scenario NewEnv refuses: %v", err)
		}
		for _, mode := range []engine.Mode{engine.Inflate, engine.Replay} {
			for _, name := range []string{baseline.FGD, baseline.K8sDefault} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				pol, _ := baseline.Lookup(name)
				cfg := engine.DefaultRunConfig(mode)
				cfg.Samples = 10
				cfg.Check = true
				_, err := engine.Run(ctx, env, pol, cfg)
				cancel()
				if err != nil && !errors.Is(err, sim.ErrInvalid) {
					t.Fatalf("%s %s: %v", mode, name, err)
				}
			}
		}
	})
}

package fl

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/quant"
)

// TestTwentyAgentsFullRounds: 20 sites train three synchronous rounds
// against a real embedded NATS server; every round takes all 20 updates,
// the model versions advance 1 -> 4, every site installs version 4, and
// the global model moves towards what the sites learn.
func TestTwentyAgentsFullRounds(t *testing.T) {
	srv := fltest.StartNATS(t)
	f := newFleet(t, srv.ClientURL(), 20)
	cfg := f.coordinatorConfig(t.TempDir())
	cfg.AutoRounds, cfg.Rounds, cfg.MinUpdates = true, 3, 20
	start := fltest.SmallModel(t, 1)
	c, _ := f.runCoordinator(cfg, start)
	var agents []*agent
	for _, s := range f.sites {
		agents = append(agents, f.startAgent(s, filepath.Join(t.TempDir(), s), f.synthetic(0.001), nil))
	}
	fullRounds(t, c, 3, 20, 60*time.Second)
	allInstalled(t, agents, 4, 20*time.Second)
	// Each round moves half way to the target (rate 0.5): after three the
	// distance is about 1/8 of the start (int8 updates and noise aside).
	_, art, err := agents[0].c.InstalledInt8()
	if err != nil || art.Header.DType != quant.Int8 {
		t.Fatalf("installed artifact: %v", err)
	}
	final := fetchFloat(t, c, 4)
	d0, d3 := distance(start.Net.Flat(), f.target), distance(final, f.target)
	t.Logf("distance to the sites' target: %.4f -> %.4f after 3 rounds", d0, d3)
	if d3 > 0.2*d0 {
		t.Fatalf("global model did not converge: %.4f -> %.4f", d0, d3)
	}
	for _, a := range agents {
		st, _ := a.c.Status()
		if st.Counters.Accepted != 3 || st.Counters.Trained != 3 {
			t.Errorf("%s: counters %+v", st.Site, st.Counters)
		}
	}
}

// fetchFloat reads a model version's weights through the admin API's
// registry and the store (via Rollback's source path).
func fetchFloat(t *testing.T, c *coordinator.Coordinator, version uint64) []float32 {
	t.Helper()
	m, err := c.FloatModel(version)
	if err != nil {
		t.Fatal(err)
	}
	return m.Net.Flat()
}

var _ = context.Background

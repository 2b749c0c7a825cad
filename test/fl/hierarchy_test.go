//go:build unix

package fl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/region"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// Hierarchical rounds (docs/federated.md "Hierarchical rounds"): regional
// aggregators on their own NATS servers, one root.

// fixedClock stands still: two roots bootstrapped and closing rounds at
// the same instant make byte-identical artifacts from identical sums.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// hierFleet is a fleet's sites, regions and keys, the same for the flat
// and the hierarchical runs it is compared across.
type hierFleet struct {
	sites   []string
	keys    map[string]*quant.Signer
	reg     *federated.Registry
	regions *federated.Regions
	rkeys   map[string]*quant.Signer
	of      map[string]string // site -> region ("": sends to the root)
	start   *policy.Model
	signer  *quant.Signer
	clock   fixedClock
}

// newHierFleet makes len(perRegion) regions (r0, r1, ...) of the given
// site counts and direct sites sending to the root.
func newHierFleet(t testing.TB, perRegion []int, direct int) *hierFleet {
	t.Helper()
	f := &hierFleet{keys: map[string]*quant.Signer{}, reg: &federated.Registry{}, regions: &federated.Regions{},
		rkeys: map[string]*quant.Signer{}, of: map[string]string{}, start: fltest.SmallModel(t, 3), signer: tpKey(t, 60_000),
		clock: fixedClock{time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)}}
	add := func(g string) string {
		s := fmt.Sprintf("site-%04d", len(f.sites))
		k := tpKey(t, len(f.sites)+1)
		if err := f.reg.Add(s, k.Public()); err != nil {
			t.Fatal(err)
		}
		f.sites, f.keys[s], f.of[s] = append(f.sites, s), k, g
		return s
	}
	for i, n := range perRegion {
		g := fmt.Sprintf("r%d", i)
		var sites []string
		for range n {
			sites = append(sites, add(g))
		}
		f.rkeys[g] = tpKey(t, 61_000+i)
		if err := f.regions.Add(g, f.rkeys[g].Public(), sites...); err != nil {
			t.Fatal(err)
		}
	}
	for range direct {
		add("")
	}
	return f
}

// root runs a coordinator for the fleet on url (with its regions when
// hier) and waits for the bootstrap model's publication.
func (f *hierFleet) root(t testing.TB, url string, hier bool, edit func(*coordinator.Config)) (*coordinator.Coordinator, func()) {
	t.Helper()
	cfg := fltest.CoordinatorConfig(t.TempDir(), f.reg, f.signer)
	cfg.Clock, cfg.MinUpdates, cfg.AutoRounds = f.clock, len(f.sites), false
	if hier {
		cfg.Regions = f.regions
	}
	if edit != nil {
		edit(&cfg)
	}
	c, stop := fltest.RunCoordinator(t, url, cfg, f.start)
	fltest.Eventually(t, 30*time.Second, "bootstrap model published", func() (bool, string) {
		m, err := c.ModelRecord(1)
		return err == nil && m.Status == coordinator.ModelPublished, fmt.Sprint(err)
	})
	return c, stop
}

// update is site's signed update for round r: deltas of 0.01 N(0,1)
// drawn from PCG(site index, round), site 0's scaled to an L2 norm of
// about 40 (clipped to 10 when aggregated), samples 100 + 7*index.
func (f *hierFleet) update(t testing.TB, rr *coordinator.RegionalRound, site string) []byte {
	t.Helper()
	i := slices.Index(f.sites, site)
	r := rr.Round
	rng := rand.New(rand.NewPCG(uint64(i), r.Round))
	delta := make([]float32, rr.Dims)
	scale := 0.01
	if i == 0 {
		scale = 40 / math.Sqrt(float64(rr.Dims))
	}
	for j := range delta {
		delta[j] = float32(scale * rng.NormFloat64())
	}
	payload, err := quant.EncodeUpdate(&quant.Update{Base: r.BaseModel, Values: delta}, quant.DefaultUpdateOptions(uint64(i)<<32|r.Round))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: r.Round, Round: r.Round, BaseModel: r.BaseModel,
		BaseVersion: r.BaseVersion, Samples: int64(100 + 7*i), Created: f.clock.t}, payload, f.keys[site])
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func publish(t testing.TB, js jetstream.JetStream, site string, seq uint64, msg []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, federated.UpdateSubjectPrefix+site, msg, jetstream.WithMsgID(federated.MsgID(site, seq))); err != nil {
		t.Fatalf("publish %s: %v", site, err)
	}
}

// startRound opens the root's next round and returns what a region gets
// for it.
func startRound(t testing.TB, c *coordinator.Coordinator) *coordinator.RegionalRound {
	t.Helper()
	r, err := c.StartRound(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rr, err := c.RegionalRound(r.Round)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// published waits for round n's model and returns its record.
func published(t testing.TB, c *coordinator.Coordinator, n uint64, within time.Duration) *coordinator.Model {
	t.Helper()
	var r *coordinator.Round
	fltest.Eventually(t, within, fmt.Sprintf("round %d published", n), func() (bool, string) {
		var err error
		r, err = c.RoundRecord(n)
		return err == nil && r.State == coordinator.StatePublished, fmt.Sprintf("%+v %v", r, err)
	})
	m, err := c.ModelRecord(r.Result)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runRegion runs region g's aggregator on its own NATS server (local),
// forwarding to the root at rootURL; it returns the aggregator, a
// publisher on the region's server and stop (Run ended, store closed).
func (f *hierFleet) runRegion(t testing.TB, g, dir, localURL, rootURL string) (*region.Aggregator, func()) {
	t.Helper()
	reg := &federated.Registry{}
	for _, s := range f.regions.Sites(g) {
		if err := reg.Add(s, f.keys[s].Public()); err != nil {
			t.Fatal(err)
		}
	}
	cfg := region.DefaultConfig()
	cfg.Region, cfg.DataDir, cfg.Sites, cfg.Signer, cfg.PollInterval = g, dir, reg, f.rkeys[g], 20*time.Millisecond
	a, err := region.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	local, root := fltest.Connect(t, localURL, "region-"+g), fltest.Connect(t, rootURL, "region-"+g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, local, root) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("region %s: %v", g, err)
			}
			a.Close()
			local.Close()
			root.Close()
		})
	}
	t.Cleanup(stop)
	return a, stop
}

// jsOn is a JetStream publisher on url.
func jsOn(t testing.TB, url, name string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(fltest.Connect(t, url, name))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// flatRun is the reference: every update of round 1 straight to one root.
func (f *hierFleet) flatRun(t *testing.T) (*coordinator.Model, []float32) {
	t.Helper()
	srv := fltest.StartNATS(t)
	c, _ := f.root(t, srv.ClientURL(), false, nil)
	rr := startRound(t, c)
	js := jsOn(t, srv.ClientURL(), "sites")
	for _, s := range f.sites {
		publish(t, js, s, rr.Round.Round, f.update(t, rr, s))
	}
	m := published(t, c, rr.Round.Round, 60*time.Second)
	return m, fetchFloat(t, c, m.Version)
}

// TestHierarchicalEqualsFlat: 3 regions of 4, 5 and 3 sites plus 2 sites
// sending to the root directly; the same updates (one clipped) aggregated
// by one root, and by the regions then the root, give the same model bit
// for bit: the regions' partial sums are exact integers whose sum is the
// flat sum, and the root recomputes the weight totals from the sites'
// samples. With the roots' clocks fixed even the artifacts' model IDs
// agree.
func TestHierarchicalEqualsFlat(t *testing.T) {
	f := newHierFleet(t, []int{4, 5, 3}, 2)
	flat, flatW := f.flatRun(t)

	rootSrv := fltest.StartNATS(t)
	c, _ := f.root(t, rootSrv.ClientURL(), true, nil)
	rr := startRound(t, c)
	pubs := map[string]jetstream.JetStream{"": jsOn(t, rootSrv.ClientURL(), "direct-sites")}
	var aggs []*region.Aggregator
	for _, g := range f.regions.Names() {
		srv := fltest.StartNATS(t)
		a, _ := f.runRegion(t, g, t.TempDir(), srv.ClientURL(), rootSrv.ClientURL())
		aggs = append(aggs, a)
		pubs[g] = jsOn(t, srv.ClientURL(), "sites-"+g)
	}
	for _, a := range aggs {
		fltest.Eventually(t, 30*time.Second, "regions follow round 1", func() (bool, string) {
			n, _, _ := a.Current()
			return n == rr.Round.Round, fmt.Sprint("at round ", n)
		})
	}
	for _, s := range f.sites {
		publish(t, pubs[f.of[s]], s, rr.Round.Round, f.update(t, rr, s))
	}
	hier := published(t, c, rr.Round.Round, 60*time.Second)
	hierW := fetchFloat(t, c, hier.Version)
	if !slices.Equal(flatW, hierW) {
		diff := 0
		for i := range flatW {
			if flatW[i] != hierW[i] {
				diff++
			}
		}
		t.Fatalf("hierarchical model differs from the flat one in %d of %d weights", diff, len(flatW))
	}
	if hier.FloatModel != flat.FloatModel {
		t.Errorf("float model IDs differ: flat %s, hierarchical %s", flat.FloatModel, hier.FloatModel)
	}
	r, _ := c.RoundRecord(rr.Round.Round)
	if r.Accepted != len(f.sites) {
		t.Errorf("root accepted %d updates, want %d", r.Accepted, len(f.sites))
	}
	for _, a := range aggs {
		if out, _ := a.Outbox(); len(out) != 0 {
			t.Errorf("outbox still holds %v", out)
		}
	}
}

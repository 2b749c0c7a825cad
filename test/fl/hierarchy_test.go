//go:build unix

package fl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/region"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
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
	start   *nn.Model
	signer  *quant.Signer
	clock   fixedClock
	// target, when set, is what honest sites learn (their deltas are
	// target plus 0.01 N(0,1) noise), and byz scales target for the
	// Byzantine sites (by index) instead
	target []float32
	byz    map[int]float32
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
	return f.updateSeq(t, rr, site, rr.Round.Round)
}

// updateSeq is update with sequence seq.
func (f *hierFleet) updateSeq(t testing.TB, rr *coordinator.RegionalRound, site string, seq uint64) []byte {
	t.Helper()
	i := slices.Index(f.sites, site)
	r := rr.Round
	rng := rand.New(rand.NewPCG(uint64(i), r.Round))
	delta := make([]float32, rr.Dims)
	scale := 0.01
	if i == 0 && f.target == nil {
		scale = 40 / math.Sqrt(float64(rr.Dims))
	}
	for j := range delta {
		delta[j] = float32(scale * rng.NormFloat64())
		if f.target != nil {
			delta[j] += f.target[j]
			if b, ok := f.byz[i]; ok {
				delta[j] = b * f.target[j]
			}
		}
	}
	payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: delta}, esu.DefaultOptions(uint64(i)<<32|r.Round))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: seq, Round: r.Round, BaseModel: r.BaseModel,
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

// flatRun is the reference: every update of round 1 straight to one root
// (edit, when set, edits its configuration).
func (f *hierFleet) flatRun(t *testing.T, edit func(*coordinator.Config)) (*coordinator.Model, []float32) {
	t.Helper()
	srv := fltest.StartNATS(t)
	c, _ := f.root(t, srv.ClientURL(), false, edit)
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
	flat, flatW := f.flatRun(t, nil)
	hier, hierW, c := f.hierRun(t, nil)
	if diff := countDiff(flatW, hierW); diff > 0 {
		t.Fatalf("hierarchical model differs from the flat one in %d of %d weights", diff, len(flatW))
	}
	if hier.FloatModel != flat.FloatModel {
		t.Errorf("float model IDs differ: flat %s, hierarchical %s", flat.FloatModel, hier.FloatModel)
	}
	if r, _ := c.RoundRecord(hier.Round); r.Accepted != len(f.sites) {
		t.Errorf("root accepted %d updates, want %d", r.Accepted, len(f.sites))
	}
}

func countDiff(a, b []float32) int {
	if len(a) != len(b) {
		return max(len(a), len(b))
	}
	diff := 0
	for i := range a {
		if a[i] != b[i] {
			diff++
		}
	}
	return diff
}

// hierRun runs round 1 with a root, each region's aggregator on its own
// NATS server and the direct sites sending to the root; it returns the
// round's model, its weights and the root.
func (f *hierFleet) hierRun(t *testing.T, edit func(*coordinator.Config)) (*coordinator.Model, []float32, *coordinator.Coordinator) {
	t.Helper()
	rootSrv := fltest.StartNATS(t)
	c, _ := f.root(t, rootSrv.ClientURL(), true, edit)
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
	m := published(t, c, rr.Round.Round, 60*time.Second)
	for _, a := range aggs {
		if out, _ := a.Outbox(); len(out) != 0 {
			t.Errorf("outbox still holds %v", out)
		}
	}
	return m, fetchFloat(t, c, m.Version), c
}

// TestHierarchicalRobust: median and trimmed mean (beta 0.2) with 2 of 10
// sites Byzantine (20%), both in region r0 (40% of it), one sending -10
// and one +20 times what the honest sites learn. A round that does not
// sum is relayed: the regions verify their sites' updates and forward
// them as they are, and the root combines them under its rule, so the
// two-level result is the flat one bit for bit and keeps its guarantee —
// every coordinate within the honest updates' range (the median with
// fewer than half Byzantine, the trimmed mean with at most beta*n, 2 of
// 10, at each end) — whatever region the Byzantine sites sit in.
func TestHierarchicalRobust(t *testing.T) {
	for _, rule := range []string{federated.RuleMedian, federated.RuleTrimmedMean} {
		t.Run(rule, func(t *testing.T) {
			f := newHierFleet(t, []int{5, 5}, 0)
			rng := rand.New(rand.NewPCG(99, 99))
			f.target = make([]float32, f.start.Net.NumParams())
			for j := range f.target {
				f.target[j] = float32(0.02 * rng.NormFloat64())
			}
			f.byz = map[int]float32{1: -10, 3: 20} // sites 1 and 3: region r0
			edit := func(cfg *coordinator.Config) {
				cfg.Aggregator.Rule, cfg.Aggregator.TrimBeta = rule, 0.2
			}
			_, flatW := f.flatRun(t, edit)
			_, hierW, c := f.hierRun(t, edit)
			if diff := countDiff(flatW, hierW); diff > 0 {
				t.Fatalf("hierarchical model differs from the flat one in %d of %d weights", diff, len(flatW))
			}
			// the applied update against the honest updates' range
			rr, err := c.RegionalRound(1)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := make([]float32, len(f.target)), make([]float32, len(f.target))
			for j := range lo {
				lo[j], hi[j] = float32(math.Inf(1)), float32(math.Inf(-1))
			}
			for i, s := range f.sites {
				if _, bad := f.byz[i]; bad {
					continue
				}
				m, err := federated.DecodeUpdateMsg(f.update(t, rr, s), f.reg)
				if err != nil {
					t.Fatal(err)
				}
				u, err := esu.Decode(m.Payload, len(lo))
				if err != nil {
					t.Fatal(err)
				}
				for j, v := range u.Values {
					lo[j], hi[j] = min(lo[j], v), max(hi[j], v)
				}
			}
			start := f.start.Net.Flat()
			outside := 0
			for j := range start {
				d := hierW[j] - start[j]
				// (float32 rounding of start + aggregate)
				tol := 1e-6 * max(1, float32(math.Abs(float64(start[j]))))
				if d < lo[j]-tol || d > hi[j]+tol {
					outside++
				}
			}
			if outside > 0 {
				t.Fatalf("%d of %d coordinates of the applied update outside the honest updates' range", outside, len(start))
			}
		})
	}
}

// TestRegionalAggregateRefusals: the root refuses, as a whole and by a
// named reason (counted in regional_aggregates_total, in the store's
// reject counts and in the audit log), every regional aggregate that
// forges or double-counts: a bad or unknown key, another region's site, a
// site listed twice, a site that sent its update directly, a round not
// open, another fixed point, another region's subject, sums beyond their
// bound; the same aggregate delivered again changes nothing, a second
// aggregate of the region for the round is refused, and a site the region
// counted cannot send directly afterwards.
func TestRegionalAggregateRefusals(t *testing.T) {
	f := newHierFleet(t, []int{3, 3}, 1)
	srv := fltest.StartNATS(t)
	dir := t.TempDir()
	c, stop := f.root(t, srv.ClientURL(), true, func(cfg *coordinator.Config) { cfg.DataDir = dir })
	rr := startRound(t, c)
	round := rr.Round.Round
	ctx := context.Background()
	// r0's first site sends its update to the root directly
	direct := f.regions.Sites("r0")[0]
	if ack, err := c.ProcessFrom(ctx, federated.UpdateSubjectPrefix+direct, f.update(t, rr, direct)); err != nil || ack.Status != federated.Accepted {
		t.Fatalf("direct update: %+v %v", ack, err)
	}
	r0, r1 := f.regions.Sites("r0"), f.regions.Sites("r1")
	entry := func(s string) federated.RegionalSite {
		return federated.RegionalSite{Site: s, Seq: round, Samples: 100, BaseVersion: rr.Round.BaseVersion, Norm: 1}
	}
	type agg struct {
		region  string
		round   uint64
		shift   int
		sites   []string
		key     *quant.Signer
		subject string // "" the region's
		hi0     int64
	}
	encode := func(a agg) []byte {
		ra := &federated.RegionalAggregate{Header: federated.RegionalHeader{Region: a.region, Round: a.round, Shift: a.shift},
			Hi: make([]int64, rr.Dims), Lo: make([]uint64, rr.Dims)}
		for _, s := range a.sites {
			ra.Header.Sites = append(ra.Header.Sites, entry(s))
		}
		ra.Hi[0] = a.hi0
		raw, err := federated.EncodeRegional(ra, a.key)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	shift := rr.Round.Sum.Shift
	good := agg{region: "r0", round: round, shift: shift, sites: r0[1:], key: f.rkeys["r0"]}
	with := func(edit func(*agg)) agg { a := good; a.sites = slices.Clone(good.sites); edit(&a); return a }
	stranger := tpKey(t, 99_999)
	for _, tc := range []struct {
		name   string
		agg    agg
		reason string
	}{
		{"signed by another region's key", with(func(a *agg) { a.key = f.rkeys["r1"] }), federated.ReasonSignature},
		{"unknown region", with(func(a *agg) { a.region, a.key = "r9", stranger }), federated.ReasonSignature},
		{"another region's site", with(func(a *agg) { a.sites = append(a.sites, r1[0]) }), coordinator.ReasonForeignSite},
		{"a direct site of no region", with(func(a *agg) { a.sites = append(a.sites, f.sites[len(f.sites)-1]) }), coordinator.ReasonForeignSite},
		{"a site listed twice", with(func(a *agg) { a.sites = append(a.sites, a.sites[0]) }), coordinator.ReasonSiteTwice},
		{"a site that sent directly", with(func(a *agg) { a.sites = append(a.sites, direct) }), coordinator.ReasonSiteCounted},
		{"a round not open", with(func(a *agg) { a.round = round + 1 }), coordinator.ReasonRoundNotOpen},
		{"another fixed point", with(func(a *agg) { a.shift = shift - 1 }), coordinator.ReasonFixedPoint},
		{"another region's subject", with(func(a *agg) { a.subject = federated.RegionalSubjectPrefix + "r1" }), federated.ReasonMalformed},
		// 2 sites' sums are at most 2 * 2 * limit * 2^shift; 2^62 units
		// of 2^-shift (shift >= 84) are far less: 2^126 is beyond
		{"sums beyond their bound", with(func(a *agg) { a.hi0 = 1 << 62 }), federated.ReasonTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subject := tc.agg.subject
			if subject == "" {
				subject = federated.RegionalSubjectPrefix + tc.agg.region
			}
			v, err := c.ProcessRegional(ctx, subject, encode(tc.agg))
			if err != nil {
				t.Fatal(err)
			}
			if v.Status != federated.Rejected || v.Reason != tc.reason {
				t.Fatalf("verdict %+v, want rejected: %s", v, tc.reason)
			}
		})
	}
	if r, _ := c.RoundRecord(round); r.Accepted != 1 {
		t.Fatalf("refused aggregates counted: the round has %d updates, want the direct one", r.Accepted)
	}
	raw := encode(good)
	for i, want := range []bool{false, true} { // again: the same bytes
		v, err := c.ProcessRegional(ctx, federated.RegionalSubjectPrefix+"r0", raw)
		if err != nil || v.Status != federated.Accepted || v.Again != want {
			t.Fatalf("delivery %d: %+v %v", i+1, v, err)
		}
	}
	if v, err := c.ProcessRegional(ctx, federated.RegionalSubjectPrefix+"r0", encode(with(func(a *agg) { a.sites = a.sites[:1] }))); err != nil || v.Reason != coordinator.ReasonRegionAgain {
		t.Fatalf("second aggregate of r0: %+v %v", v, err)
	}
	// (a newer sequence: the same one would be the region's update
	// delivered again, answered as accepted and counted nothing)
	if ack, err := c.ProcessFrom(ctx, federated.UpdateSubjectPrefix+r0[1], f.updateSeq(t, rr, r0[1], round+1)); err != nil || ack.Reason != federated.ReasonReplay {
		t.Fatalf("direct update of a site r0 counted: %+v %v", ack, err)
	}
	r, _ := c.RoundRecord(round)
	if want := 1 + len(good.sites); r.Accepted != want {
		t.Fatalf("round has %d updates, want %d (1 direct, %d via r0)", r.Accepted, want, len(good.sites))
	}
	counted := func(region, status, reason string) float64 {
		return scrape(t, c, "edgesched_coordinator_regional_aggregates_total", fmt.Sprintf(`{reason="%s",region="%s",status="%s"}`, reason, region, status))
	}
	counts := map[string]float64{"": counted("r0", "accepted", "")}
	for _, reason := range []string{federated.ReasonSignature, federated.ReasonMalformed} { // (not attributable to a region)
		counts[reason] = counted("", "rejected", reason)
	}
	for _, reason := range []string{coordinator.ReasonForeignSite, coordinator.ReasonSiteTwice, coordinator.ReasonSiteCounted,
		coordinator.ReasonRoundNotOpen, coordinator.ReasonFixedPoint, federated.ReasonTooLarge, coordinator.ReasonRegionAgain} {
		counts[reason] = counted("r0", "rejected", reason)
	}
	rejects, _ := c.Rejects()
	// edgectl regions: r0's verdicts (region_again is not kept: the
	// accepted one stands; nor is round_not_open's, of a round not yet
	// open), r1 none
	rs, err := c.RegionStatuses()
	if err != nil || len(rs) != 2 || rs[0].Accepted != 1 || rs[0].Refused != 6 || rs[0].Sites != 3 || rs[1].Accepted+rs[1].Refused != 0 {
		t.Errorf("region statuses %+v %v, want r0 with 3 sites, 1 accepted and 6 refused, r1 none", rs, err)
	}
	stop()
	audit := auditCounts(t, filepath.Join(dir, "coordinator.db"))
	wantRefused := map[string]float64{federated.ReasonSignature: 2, coordinator.ReasonForeignSite: 2, coordinator.ReasonSiteTwice: 1,
		coordinator.ReasonSiteCounted: 1, coordinator.ReasonRoundNotOpen: 1, coordinator.ReasonFixedPoint: 1, federated.ReasonMalformed: 1,
		federated.ReasonTooLarge: 1, coordinator.ReasonRegionAgain: 1}
	total := 0
	for reason, n := range wantRefused {
		total += int(n)
		if counts[reason] != n || rejects["regional."+reason] != uint64(n) {
			t.Errorf("%s: metric %v, store %d, want %v", reason, counts[reason], rejects["regional."+reason], n)
		}
	}
	if counts[""] != 1 || audit["regional.accepted"] != 1 || audit["regional.rejected"] != total {
		t.Errorf("accepted metric %v, audit accepted %d, rejected %d (want 1, 1, %d)", counts[""], audit["regional.accepted"], audit["regional.rejected"], total)
	}
}

// TestRegionRestartMidRound: region r0 (6 sites) stops after counting 3
// updates, 2 more arrive in its stream while it is down and a copy of a
// counted one is published again (an outbox retry past the stream's
// de-duplication window); restarted on its store it counts the rest
// once. Region r1 (2 sites) seals while the WAN is down (its aggregate
// waits in the outbox across a restart), forwards it once its root
// connection is back, and the root, offered the same aggregate again
// under another MsgID, counts nothing. The model equals the flat run's.
func TestRegionRestartMidRound(t *testing.T) {
	f := newHierFleet(t, []int{6, 2}, 0)
	_, flatW := f.flatRun(t, nil)

	rootSrv := fltest.StartNATS(t)
	c, _ := f.root(t, rootSrv.ClientURL(), true, nil)
	rr := startRound(t, c)
	round := rr.Round.Round
	r0, r1 := f.regions.Sites("r0"), f.regions.Sites("r1")

	// r0: stopped and restarted mid-round
	srv0 := fltest.StartNATS(t)
	dir0 := t.TempDir()
	js0 := jsOn(t, srv0.ClientURL(), "sites-r0")
	a0, stop0 := f.runRegion(t, "r0", dir0, srv0.ClientURL(), rootSrv.ClientURL())
	counted := func(a *region.Aggregator, want int) {
		t.Helper()
		fltest.Eventually(t, 30*time.Second, fmt.Sprintf("%d updates counted", want), func() (bool, string) {
			n, _, k := a.Current()
			return n == round && k == want, fmt.Sprintf("round %d, %d counted", n, k)
		})
	}
	counted(a0, 0)
	for _, s := range r0[:3] {
		publish(t, js0, s, round, f.update(t, rr, s))
	}
	counted(a0, 3)
	stop0()
	for _, s := range r0[3:5] {
		publish(t, js0, s, round, f.update(t, rr, s))
	}
	ctx := context.Background()
	if _, err := js0.Publish(ctx, federated.UpdateSubjectPrefix+r0[0], f.update(t, rr, r0[0]), jetstream.WithMsgID("copy")); err != nil {
		t.Fatal(err)
	}
	a0, _ = f.runRegion(t, "r0", dir0, srv0.ClientURL(), rootSrv.ClientURL())
	counted(a0, 5)
	publish(t, js0, r0[5], round, f.update(t, rr, r0[5]))

	// r1: sealed during a WAN outage (no Run: the root is unreachable)
	reg := &federated.Registry{}
	for _, s := range r1 {
		_ = reg.Add(s, f.keys[s].Public())
	}
	cfg := region.DefaultConfig()
	cfg.Region, cfg.DataDir, cfg.Sites, cfg.Signer = "r1", t.TempDir(), reg, f.rkeys["r1"]
	a1, err := region.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a1.Open(rr); err != nil {
		t.Fatal(err)
	}
	for _, s := range r1 {
		if ack, err := a1.Process(federated.UpdateSubjectPrefix+s, f.update(t, rr, s)); err != nil || ack.Status != federated.Accepted {
			t.Fatalf("%s: %+v %v", s, ack, err)
		}
	}
	if out, _ := a1.Outbox(); !slices.Equal(out, []uint64{round}) {
		t.Fatalf("r1's outbox after its last site: %v, want [%d] (sealed)", out, round)
	}
	a1.Close() // restart
	if a1, err = region.New(cfg); err != nil {
		t.Fatal(err)
	}
	defer a1.Close()
	rjs := jsOn(t, rootSrv.ClientURL(), "region-r1")
	for i, want := range []int{1, 0} {
		if n, err := a1.Forward(ctx, rjs); err != nil || n != want {
			t.Fatalf("forward %d: %d sent, %v; want %d", i+1, n, err, want)
		}
	}
	// the same aggregate again, past the stream's de-duplication
	st, err := rjs.Stream(ctx, federated.RegionalStream)
	if err != nil {
		t.Fatal(err)
	}
	var sent []byte
	for seq := uint64(1); sent == nil; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("r1's aggregate not in the regional stream: %v", err)
		}
		if m.Subject == federated.RegionalSubjectPrefix+"r1" {
			sent = m.Data
		}
	}
	if _, err := rjs.Publish(ctx, federated.RegionalSubjectPrefix+"r1", sent, jetstream.WithMsgID("resent")); err != nil {
		t.Fatal(err)
	}

	m := published(t, c, round, 60*time.Second)
	if !slices.Equal(fetchFloat(t, c, m.Version), flatW) {
		t.Fatal("model after the region's restart differs from the flat run's")
	}
	r, _ := c.RoundRecord(round)
	if r.Accepted != len(f.sites) {
		t.Fatalf("root accepted %d, want %d", r.Accepted, len(f.sites))
	}
	// the resent copy reaches the root after the round closed: judged as
	// the same aggregate (accepted before), nothing counted
	fltest.Eventually(t, 10*time.Second, "the resent aggregate judged", func() (bool, string) {
		info, err := st.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		cons, err := st.Consumer(ctx, "coordinator")
		if err != nil {
			return false, err.Error()
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return ci.AckFloor.Stream == info.State.LastSeq, fmt.Sprintf("ack floor %d of %d", ci.AckFloor.Stream, info.State.LastSeq)
	})
	if r, _ := c.RoundRecord(round); r.Accepted != len(f.sites) {
		t.Fatalf("root accepted %d after the resent aggregate, want %d", r.Accepted, len(f.sites))
	}
}

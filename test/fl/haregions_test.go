//go:build unix

package fl

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/region"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// HA root with regions: 3 regions of 10 sites each (the sites are
// simulated: their signed updates are published into their region's
// NATS server), haRegionRounds synchronous rounds that wait for all 30,
// the active root killed in round haRegionKillRound.
const (
	haRegionSites     = 10
	haRegionCount     = 3
	haRegionRounds    = 3
	haRegionKillRound = 2
)

// TestHAWithRegions: a highly available root (two edge-coordinator
// processes with --ha on a 3-server JetStream cluster, everything R3)
// runs hierarchical rounds with three regional aggregators. In round 2,
// once region r0's aggregate is merged (and acked) but before any further
// checkpoint (--checkpoint-every is far longer than the test: the last
// checkpoint is the one before round 2's announcement), the active root
// dies: SIGKILLed by the test once it reports r0's sites counted
// ("kill"), SIGKILLed by itself right after the ack of that aggregate
// (failpoint regional.acked, "failpoint"), or SIGKILLed with one NATS
// server of three shut down first ("kill-and-server-loss"). The standby
// takes the lease within 10 s, restores the checkpoint (which does not
// hold r0's aggregate) and reads the regional stream again from the
// checkpoint's regional floor with its own consumer: r0's aggregate is
// merged again into the restored store, the others arrive, and every
// round publishes. Each site is counted exactly once per round: every
// round accepted 30 updates whose weight total equals the sum of the
// sites' samples computed here (a lost aggregate would lack 10 sites'
// samples, a doubled one add them twice), three regional aggregates
// accepted per round in the audit log, each site's high-water mark at
// the last round; model versions on the bus only move forward.
func TestHAWithRegions(t *testing.T) {
	bin := buildEdgeCoordinator(t)
	for _, tc := range []struct {
		name       string
		failpoint  string
		loseServer bool
	}{
		{"kill", "", false},
		// round 1's three aggregates, then r0's of round 2
		{"failpoint", coordinator.FailRegionalAcked + ":" + strconv.Itoa(haRegionCount*(haRegionKillRound-1)+1), false},
		{"kill-and-server-loss", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) { runHAWithRegions(t, bin, tc.failpoint, tc.loseServer) })
	}
}

func runHAWithRegions(t *testing.T, bin, failpoint string, loseServer bool) {
	cl := fltest.StartCluster(t, 3)
	url := cl.URLs()
	per := make([]int, haRegionCount)
	for i := range per {
		per[i] = haRegionSites
	}
	f := newHierFleet(t, per, 0)
	f.clock = fixedClock{time.Now().UTC().Truncate(time.Second)}
	dir := t.TempDir()
	base := append(rootProcArgs(t, dir, url, haRegionRounds, f.signer, f.sites, f.keys, f.start, f.regions, f.rkeys), "--replicas", "3", "--ha", "--lease-ttl", "4s", "--checkpoint-every", "1h")
	logPath := filepath.Join(dir, "edge-coordinator.log")
	logOnFailure(t, logPath)
	bus := watchStateBucket(t, url)
	nc := fltest.Connect(t, url, "ha-probe")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	procs := map[string]*coordProc{}
	start := func(id, fp string) {
		procs[id] = startCoordProc(t, bin, append(base, "--data", filepath.Join(dir, id), "--replica-id", id), fp, logPath)
	}
	began := time.Now()
	start("a", failpoint)
	waitActive(t, nc, "a", 30*time.Second)
	start("b", "")

	aggs := map[string]*region.Aggregator{}
	pubs := map[string]jetstream.JetStream{}
	for _, g := range f.regions.Names() {
		srv := fltest.StartNATS(t)
		aggs[g], _ = f.runRegion(t, g, t.TempDir(), srv.ClientURL(), url)
		pubs[g] = jsOn(t, srv.ClientURL(), "sites-"+g)
	}
	sendRegion := func(rr *coordinator.RegionalRound, g string) {
		for _, s := range f.regions.Sites(g) {
			publish(t, pubs[g], s, rr.Round.Round, f.update(t, rr, s))
		}
	}
	roundState := func() (coordinator.Round, error) {
		var r coordinator.Round
		return r, adminCall(nc, coordinator.EndpointRoundStatus, &r)
	}
	var took, serving time.Duration
	for n := uint64(1); n <= haRegionRounds; n++ {
		rr := regionalRound(t, nc, n, aggs)
		if n != haRegionKillRound {
			for _, g := range f.regions.Names() {
				sendRegion(rr, g)
			}
		} else {
			sendRegion(rr, "r0")
			a := procs["a"]
			if failpoint != "" {
				a.waitExit(t, 60*time.Second, "the failpoint after r0's aggregate")
				if !a.killedBySIGKILL() {
					t.Fatalf("replica a ended with %v, want its failpoint's SIGKILL", a.waitErr)
				}
			} else {
				fltest.Eventually(t, 60*time.Second, "r0's sites counted by replica a", func() (bool, string) {
					r, err := roundState()
					return err == nil && r.Round == n && r.Accepted >= haRegionSites, fmt.Sprintf("%+v %v", r, err)
				})
				if loseServer {
					shutdownStreamLeader(t, cl, js, "KV_"+coordinator.LeaseBucket)
				}
				if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				a.waitExit(t, 10*time.Second, "after SIGKILL")
			}
			killed := time.Now()
			t.Logf("replica a killed in round %d after r0's aggregate (%v into the run)", n, killed.Sub(began).Round(time.Millisecond))
			// the other regions' sites send while the root fails over:
			// their aggregates wait in the regional stream
			for _, g := range f.regions.Names()[1:] {
				sendRegion(rr, g)
			}
			took = waitLeaseHolder(t, js, "b", killed, 3*haTakeover)
			st := waitActive(t, nc, "b", 6*haTakeover)
			serving = time.Since(killed)
			if st.Checkpoint == nil {
				t.Fatalf("replica b active without a checkpoint: %+v", st)
			}
			t.Logf("replica b took the lease %v after the kill, served as the active after %v (epoch %d, checkpoint %s, floors: update %d, regional %d)",
				took.Round(time.Millisecond), serving.Round(time.Millisecond), st.Epoch, st.Checkpoint.Object, st.Checkpoint.Floor, st.Checkpoint.Regional)
			if took > haTakeover {
				t.Errorf("takeover took %v, want at most %v", took, haTakeover)
			}
		}
		roundStart := time.Now()
		fltest.Eventually(t, 120*time.Second, fmt.Sprintf("round %d published", n), func() (bool, string) {
			if p := procs["b"]; p.exited() {
				t.Fatalf("replica b exited: %v", p.waitErr)
			}
			r, err := roundState()
			return err == nil && (r.Round > n || (r.Round == n && r.State == coordinator.StatePublished)), fmt.Sprintf("%+v %v", r, err)
		})
		t.Logf("round %d published %v after its updates were sent", n, time.Since(roundStart).Round(time.Millisecond))
	}
	procs["b"].stop(t)
	bus.checkUpTo(t, uint64(1+haRegionRounds), haRegionRounds)

	// the surviving active's store, against the sites' own numbers
	dataDir := filepath.Join(dir, "b")
	checkBolt(t, filepath.Join(dataDir, "coordinator.db"), "after the new active stopped")
	audit := auditCounts(t, filepath.Join(dataDir, "coordinator.db"))
	if n := audit["regional.accepted"]; n != haRegionCount*haRegionRounds {
		t.Errorf("%d regional aggregates accepted, want %d (one per region and round)", n, haRegionCount*haRegionRounds)
	}
	checkStoredOnce(t, audit, 1+haRegionRounds)
	cfg := fltest.CoordinatorConfig(dataDir, f.reg, f.signer)
	cfg.Regions = f.regions
	c, err := coordinator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkRecords(t, c, haRegionRounds, len(f.sites))
	var samples float64 // update: site i reports 100 + 7i samples
	for i := range f.sites {
		samples += float64(100 + 7*i)
	}
	rs, err := c.Rounds(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if w := r.Stats["weight_total"]; w != samples {
			t.Errorf("round %d: weight total %v, want the sites' samples %v (each site once)", r.Round, w, samples)
		}
	}
	// the reference: one flat root (no regions, no failover) fed the same
	// updates round by round makes the same models bit for bit (FedAvg of
	// exact integer sums, TestHierarchicalEqualsFlat)
	refURL := fltest.StartNATS(t).ClientURL()
	ref, _ := f.root(t, refURL, false, nil)
	refJS := jsOn(t, refURL, "flat-sites")
	for n := uint64(1); n <= haRegionRounds; n++ {
		rr := startRound(t, ref)
		for _, s := range f.sites {
			publish(t, refJS, s, n, f.update(t, rr, s))
		}
		m := published(t, ref, n, 60*time.Second)
		if diff := countDiff(fetchFloat(t, ref, m.Version), fetchFloat(t, c, m.Version)); diff > 0 {
			t.Errorf("version %d differs from the flat reference's in %d weights", m.Version, diff)
		}
	}
	t.Logf("%d sites in %d regions, %d rounds: %v in all; takeover %v, serving %v", len(f.sites), haRegionCount, haRegionRounds,
		time.Since(began).Round(time.Millisecond), took.Round(time.Millisecond), serving.Round(time.Millisecond))
}

// regionalRound waits until the root serves round n and every region
// follows it, and returns what the regions got for it.
func regionalRound(t *testing.T, nc *nats.Conn, n uint64, aggs map[string]*region.Aggregator) *coordinator.RegionalRound {
	t.Helper()
	var rr *coordinator.RegionalRound
	fltest.Eventually(t, 120*time.Second, fmt.Sprintf("round %d collecting", n), func() (bool, string) {
		var err error
		rr, err = region.RequestRound(context.Background(), nc, n)
		return err == nil && rr.Round.State == coordinator.StateCollecting, fmt.Sprint(err)
	})
	for g, a := range aggs {
		fltest.Eventually(t, 30*time.Second, fmt.Sprintf("region %s following round %d", g, n), func() (bool, string) {
			k, _, _ := a.Current()
			return k == n, fmt.Sprint("at round ", k)
		})
	}
	return rr
}

//go:build unix

package fl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// Fleet scale (issue 25): one synchronous FedAvg round of simulated sites
// (update senders without training) sending signed int8 updates, flat
// (every update to the root) or hierarchical (each region's sites to
// their regional aggregator's own NATS server, ten aggregates to the
// root). Everything runs in this process, so CPU time and heap are the
// whole system's: root, regions, NATS servers and the senders' signing.

// fleetResult is what one fleet round measured.
type fleetResult struct {
	elapsed  time.Duration // first update sent to the round's model stored and published
	cpu      time.Duration // user + system CPU of the process meanwhile
	heapPeak uint64        // peak in-use heap meanwhile
	rootIn   int64         // bytes the root's NATS server received meanwhile
	updates  int64         // update message bytes the senders sent
	weights  []float32     // the round's model
}

// fleetRound runs one round of f's sites (payloads from a pool of 32 per
// round, each message signed by its site) through one root (hier: with
// its regions) and measures it.
func fleetRound(tb testing.TB, f *hierFleet, hier bool) fleetResult {
	tb.Helper()
	rootSrv := fltest.StartNATS(tb)
	c, _ := f.root(tb, rootSrv.ClientURL(), hier, func(cfg *coordinator.Config) {
		cfg.Calibrate, cfg.PollInterval = fltest.NormalRows(256, 7), 50*time.Millisecond
	})
	rr := startRound(tb, c)
	servers := map[string]*server.Server{"": rootSrv}
	if hier {
		var aggs []func() (uint64, bool, int)
		for _, g := range f.regions.Names() {
			srv := fltest.StartNATS(tb)
			servers[g] = srv
			a, _ := f.runRegion(tb, g, tb.TempDir(), srv.ClientURL(), rootSrv.ClientURL())
			aggs = append(aggs, a.Current)
		}
		for _, cur := range aggs {
			fltest.Eventually(tb, 60*time.Second, "regions follow the round", func() (bool, string) {
				n, _, _ := cur()
				return n == rr.Round.Round, fmt.Sprint("at round ", n)
			})
		}
	}
	pubs := map[string]jetstream.JetStream{}
	for g, srv := range servers {
		pubs[g] = jsOn(tb, srv.ClientURL(), "senders-"+g)
	}
	pool := make([][]byte, 32)
	rng := rand.New(rand.NewPCG(5, rr.Round.Round))
	for k := range pool {
		delta := make([]float32, rr.Dims)
		for j := range delta {
			delta[j] = float32(0.01 * rng.NormFloat64())
		}
		var err error
		if pool[k], err = quant.EncodeUpdate(&quant.Update{Base: rr.Round.BaseModel, Values: delta}, quant.DefaultUpdateOptions(uint64(k))); err != nil {
			tb.Fatal(err)
		}
	}
	var res fleetResult
	in0 := inBytes(tb, rootSrv)
	peak := sampleHeap(10 * time.Millisecond)
	defer peak()
	cpu0, start := cpuTime(), time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sendErr error
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range work {
				s := f.sites[i]
				msg, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: s, Seq: rr.Round.Round, Round: rr.Round.Round, BaseModel: rr.Round.BaseModel,
					BaseVersion: rr.Round.BaseVersion, Samples: int64(100 + i%50), Created: f.clock.t}, pool[i%len(pool)], f.keys[s])
				if err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					to := ""
					if hier {
						to = f.of[s]
					}
					_, err = pubs[to].Publish(ctx, federated.UpdateSubjectPrefix+s, msg, jetstream.WithMsgID(federated.MsgID(s, rr.Round.Round)))
					cancel()
				}
				mu.Lock()
				res.updates += int64(len(msg))
				if err != nil && sendErr == nil {
					sendErr = fmt.Errorf("site %s: %w", s, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range f.sites {
		work <- i
	}
	close(work)
	wg.Wait()
	if sendErr != nil {
		tb.Fatal(sendErr)
	}
	fltest.Poll(tb, 50*time.Millisecond, fleetWait, "round published", func() (bool, string) {
		r, err := c.RoundRecord(rr.Round.Round)
		rs, _ := c.RegionStatuses()
		rej, _ := c.Rejects()
		return err == nil && r.State == coordinator.StatePublished, fmt.Sprintf("round %+v, regions %+v, rejects %v", r, rs, rej)
	})
	m := published(tb, c, rr.Round.Round, time.Minute)
	res.elapsed, res.cpu = time.Since(start), cpuTime()-cpu0
	res.heapPeak = peak()
	res.rootIn = inBytes(tb, rootSrv) - in0
	if r, _ := c.RoundRecord(rr.Round.Round); r.Accepted != len(f.sites) {
		tb.Fatalf("root accepted %d, want %d", r.Accepted, len(f.sites))
	}
	fm, err := c.FloatModel(m.Version)
	if err != nil {
		tb.Fatal(err)
	}
	res.weights = fm.Net.Flat()
	return res
}

// fleetWait bounds a fleet round (EDGESCHED_FLEET_WAIT, default 30m).
var fleetWait = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("EDGESCHED_FLEET_WAIT")); err == nil && d > 0 {
		return d
	}
	return 30 * time.Minute
}()

func inBytes(tb testing.TB, s *server.Server) int64 {
	tb.Helper()
	v, err := s.Varz(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return v.InBytes
}

// newScaleFleet is a fleet of n sites in regions equal regions, its
// model of the given hidden sizes.
func newScaleFleet(tb testing.TB, n, regions int, layers [3]int) *hierFleet {
	tb.Helper()
	per := make([]int, regions)
	for i := range per {
		per[i] = n / regions
	}
	per[0] += n - regions*(n/regions)
	f := newHierFleet(tb, per, 0)
	net, err := policy.NewNet(policy.NumFeatures, layers[0], layers[1], layers[2], rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		tb.Fatal(err)
	}
	f.start = &policy.Model{Schema: policy.NewSchema(), Net: net}
	return f
}

func logFleet(tb testing.TB, name string, r fleetResult) {
	tb.Helper()
	tb.Logf("%-12s round %7.2fs  cpu %7.2fs  heap peak %6.1f MB  root in %8.2f MB (update bytes sent %8.2f MB)",
		name, r.elapsed.Seconds(), r.cpu.Seconds(), float64(r.heapPeak)/(1<<20), float64(r.rootIn)/(1<<20), float64(r.updates)/(1<<20))
}

// TestFleetScaleSmall is the fleet-scale run in small (120 sites in 4
// regions, the small model): the hierarchical round's model is the flat
// one's, bit for bit, and the root receives fewer bytes.
func TestFleetScaleSmall(t *testing.T) {
	f := newScaleFleet(t, 120, 4, [3]int{8, 8, 8})
	flat := fleetRound(t, f, false)
	hier := fleetRound(t, f, true)
	logFleet(t, "flat", flat)
	logFleet(t, "hierarchical", hier)
	if !slices.Equal(flat.weights, hier.weights) {
		t.Fatalf("hierarchical model differs from the flat one in %d weights", countDiff(flat.weights, hier.weights))
	}
}

// BenchmarkFleetScale: EDGESCHED_FLEET_SITES sites (default 10,000) in 10
// regions, the 50,000-parameter model, one round flat and one
// hierarchical per iteration (run it with -benchtime 1x). Metrics per
// round: s/round, cpu-s (the whole process), heap-MB (peak),
// root-in-MB (bytes into the root's NATS server).
func BenchmarkFleetScale(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("EDGESCHED_FLEET_SITES")); err == nil && v > 0 {
		n = v
	}
	f := newScaleFleet(b, n, 10, tpLayers)
	for _, hier := range []bool{false, true} {
		name := "flat"
		if hier {
			name = "hierarchical"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				r := fleetRound(b, f, hier)
				logFleet(b, name, r)
				b.ReportMetric(r.elapsed.Seconds(), "s/round")
				b.ReportMetric(r.cpu.Seconds(), "cpu-s")
				b.ReportMetric(float64(r.heapPeak)/(1<<20), "heap-MB")
				b.ReportMetric(float64(r.rootIn)/(1<<20), "root-in-MB")
			}
		})
	}
}

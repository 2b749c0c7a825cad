//go:build linux

package fl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/region"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
	"github.com/edgesched/edgesched/test/internal/gobuild"
)

// Fleet scale (issue 25): one synchronous FedAvg round of simulated sites
// (update senders without training) sending signed int8 updates, flat
// (every update to the root) or hierarchical (each region's sites to
// their regional aggregator's own NATS server, one aggregate a region to
// the root). The root coordinator and every regional aggregator are
// edge-coordinator processes, every NATS server a nats-server process
// (fleetproc_test.go), so each one's CPU time and peak resident memory
// are its own; the senders run in this process.

// fleetCalibration is the root's --calibrate: the scenario the crash
// test uses, whose replay makes the int8 calibration rows of every model
// the root stores (the bootstrap model and the round's).
const fleetCalibration = "builtin:factory-vision"

// fleetFiles are what the fleet's processes read: the edge-coordinator
// and nats-server binaries, the root's key, every site's public key (sites), the regions'
// keys and site lists (regions: REGION.pub and REGION.sites), each
// region's private key and its sites' public keys, and the start model.
type fleetFiles struct {
	bin, natsBin, rootKey, sites, regions, model string
	regionKey, regionSites                       map[string]string
}

// writeFleetFiles builds edge-coordinator and nats-server and writes f's
// files, into temporary directories.
func writeFleetFiles(tb testing.TB, f *hierFleet) *fleetFiles {
	tb.Helper()
	bins := gobuild.Build(tb, tb.TempDir(), "./cmd/edge-coordinator", "github.com/nats-io/nats-server/v2")
	dir := tb.TempDir()
	ff := &fleetFiles{bin: bins[0], natsBin: bins[1], sites: filepath.Join(dir, "sites"), regions: filepath.Join(dir, "regions"),
		model: filepath.Join(dir, "start.esm"), regionKey: map[string]string{}, regionSites: map[string]string{}}
	scratch := filepath.Join(dir, "private")
	for _, d := range []string{ff.sites, ff.regions, scratch} {
		if err := os.Mkdir(d, 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	var err error
	if ff.rootKey, _, err = quant.WriteKeyPair(dir, "root", f.signer); err != nil {
		tb.Fatal(err)
	}
	// keyPair writes name's key pair into scratch and moves the public
	// key to pub
	keyPair := func(name string, s *quant.Signer, pub string) string {
		priv, p, err := quant.WriteKeyPair(scratch, name, s)
		if err == nil {
			err = os.Rename(p, pub)
		}
		if err != nil {
			tb.Fatal(err)
		}
		return priv
	}
	for _, s := range f.sites {
		keyPair(s, f.keys[s], filepath.Join(ff.sites, s+".pub"))
	}
	for _, g := range f.regions.Names() {
		ff.regionKey[g] = keyPair(g, f.rkeys[g], filepath.Join(ff.regions, g+".pub"))
		ff.regionSites[g] = filepath.Join(dir, g+"-sites")
		if err := os.Mkdir(ff.regionSites[g], 0o700); err != nil {
			tb.Fatal(err)
		}
		sites := f.regions.Sites(g)
		for _, s := range sites {
			if err := os.Link(filepath.Join(ff.sites, s+".pub"), filepath.Join(ff.regionSites[g], s+".pub")); err != nil {
				tb.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(ff.regions, g+".sites"), []byte(strings.Join(sites, "\n")+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := nn.WriteFile(ff.model, f.start, "model", nil, nil); err != nil {
		tb.Fatal(err)
	}
	return ff
}

// procFigures are one process's figures of a round: from /proc its
// round's CPU time (from the first update sent to the model published)
// and its peak resident set (VmHWM: the process's whole life up to the
// round's end), and from rusage after SIGTERM its whole life's CPU.
// (rusage's Maxrss is not used: the child is forked sharing this
// process's memory until it execs, and Linux keeps that high-water mark
// across the exec, so a small aggregator's Maxrss is this process's.)
type procFigures struct {
	name       string
	sites      int // updates it verified (a region's sites; the flat root's all)
	cpu, total time.Duration
	peak       uint64 // VmHWM, bytes
}

// fleetResult is what one fleet round measured.
type fleetResult struct {
	elapsed time.Duration // first update sent to the round's model published
	root    procFigures
	// the NATS servers: the root's, and the regions' (by region)
	rootNATS    procFigures
	regionsNATS []procFigures
	// the root's round CPU and the round time up to the last poll (every
	// 50 ms) that found the round collecting: ingest (the flat root's
	// updates, the hierarchical root's aggregates); the rest is closing
	// the round (the model made, calibrated, stored and published)
	rootIngest, ingest time.Duration
	regions            []procFigures
	local              time.Duration // CPU of this process meanwhile: the senders
	rootIn             int64         // bytes the root's NATS server received meanwhile
	updates            int64         // update message bytes the senders sent
	weights            []float32     // the round's model
}

// fleetRound runs one round of f's sites (payloads from a pool of 32 per
// round, each message signed by its site) through one root process
// (hier: with one aggregator process a region, each on its own NATS
// server) and measures it.
func fleetRound(tb testing.TB, f *hierFleet, ff *fleetFiles, hier bool) fleetResult {
	tb.Helper()
	dir := tb.TempDir()
	rootSrv := startNATSProc(tb, "root-nats", ff.natsBin, dir)
	rootURL := rootSrv.url
	args := []string{"--server", rootURL, "--data", filepath.Join(dir, "root"), "--key", ff.rootKey, "--sites", ff.sites,
		"--model", ff.model, "--calibrate", fleetCalibration, "--round-duration", "1h", "--min-updates", strconv.Itoa(len(f.sites))}
	if hier {
		args = append(args, "--regions", ff.regions)
	}
	root := startFleetProc(tb, "root", ff.bin, filepath.Join(dir, "root.log"), args...)
	admin := fltest.Connect(tb, rootURL, "fleet-admin")
	fltest.Poll(tb, 50*time.Millisecond, fleetWait, "bootstrap model published", func() (bool, string) {
		if root.exited() {
			tb.Fatalf("root exited: %v", root.waitErr)
		}
		var m coordinator.Model
		err := askAdmin(admin, coordinator.EndpointModelShow, coordinator.AdminRequest{Version: 1}, &m)
		return err == nil && m.Status == coordinator.ModelPublished, fmt.Sprintf("%+v %v", m, err)
	})
	servers := map[string]*natsProc{"": rootSrv}
	var regions, regionsNATS []*fleetProc
	if hier {
		for _, g := range f.regions.Names() {
			srv := startNATSProc(tb, g+"-nats", ff.natsBin, dir)
			servers[g] = srv
			regionsNATS = append(regionsNATS, srv.fleetProc)
			regions = append(regions, startFleetProc(tb, "region "+g, ff.bin, filepath.Join(dir, g+".log"), "region",
				"--region", g, "--key", ff.regionKey[g], "--sites", ff.regionSites[g], "--region-server", srv.url,
				"--server", rootURL, "--data", filepath.Join(dir, g)))
		}
	}
	var round coordinator.Round
	if err := askAdmin(admin, coordinator.EndpointRoundStart, coordinator.AdminRequest{}, &round); err != nil {
		tb.Fatal(err)
	}
	rr, err := region.RequestRound(context.Background(), admin, round.Round)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range regions {
		// the region made its update stream before it follows rounds
		p.logged(tb, fleetWait, `msg="collecting for round"`, fmt.Sprintf(" round=%d ", round.Round))
	}
	pubs := map[string]jetstream.JetStream{}
	for g, srv := range servers {
		pubs[g] = jsOn(tb, srv.url, "senders-"+g)
	}
	pool := make([][]byte, 32)
	rng := rand.New(rand.NewPCG(5, rr.Round.Round))
	for k := range pool {
		delta := make([]float32, rr.Dims)
		for j := range delta {
			delta[j] = float32(0.01 * rng.NormFloat64())
		}
		if pool[k], err = esu.Encode(&esu.Update{Base: rr.Round.BaseModel, Values: delta}, esu.DefaultOptions(uint64(k))); err != nil {
			tb.Fatal(err)
		}
	}
	var res fleetResult
	in0 := rootSrv.inBytes(tb)
	root0, rootNATS0 := root.usage(tb), rootSrv.usage(tb)
	regions0, regionsNATS0 := usages(tb, regions), usages(tb, regionsNATS)
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
	var r coordinator.Round
	fltest.Poll(tb, 50*time.Millisecond, fleetWait, "round published", func() (bool, string) {
		u, at := root.usage(tb), time.Since(start)
		err := askAdmin(admin, coordinator.EndpointRoundStatus, coordinator.AdminRequest{Round: round.Round}, &r)
		if err == nil && r.State == coordinator.StateCollecting {
			res.rootIngest, res.ingest = u.cpu-root0.cpu, at
		}
		return err == nil && r.State == coordinator.StatePublished, fmt.Sprintf("round %+v %v", r, err)
	})
	res.elapsed, res.local = time.Since(start), cpuTime()-cpu0
	res.rootIn = rootSrv.inBytes(tb) - in0
	root1 := root.usage(tb)
	res.root = procFigures{name: "root", sites: len(f.sites), cpu: root1.cpu - root0.cpu, peak: root1.peak}
	res.rootNATS = roundFigures(tb, []*fleetProc{rootSrv.fleetProc}, []procUsage{rootNATS0})[0]
	res.regions, res.regionsNATS = roundFigures(tb, regions, regions0), roundFigures(tb, regionsNATS, regionsNATS0)
	for i, g := range f.regions.Names() {
		if i < len(res.regions) {
			res.regions[i].sites = len(f.regions.Sites(g))
		}
	}
	if hier {
		res.root.sites = 0 // it verified aggregates, not updates
	}

	// every site's update counted once: by the root directly, or by its
	// region in the one aggregate the root accepted of it; nothing refused
	if r.Accepted != len(f.sites) {
		tb.Errorf("root accepted %d updates, want %d", r.Accepted, len(f.sites))
	}
	var rejects map[string]uint64
	if err := askAdmin(admin, coordinator.EndpointRejects, coordinator.AdminRequest{}, &rejects); err != nil {
		tb.Fatal(err)
	}
	for reason, n := range rejects {
		if n > 0 {
			tb.Errorf("root refused %d: %s", n, reason)
		}
	}
	if hier {
		var rs []coordinator.RegionStatus
		if err := askAdmin(admin, coordinator.EndpointRegions, coordinator.AdminRequest{}, &rs); err != nil {
			tb.Fatal(err)
		}
		if len(rs) != len(regions) {
			tb.Errorf("root lists %d regions, want %d", len(rs), len(regions))
		}
		for _, s := range rs {
			if s.Accepted != 1 || s.Refused != 0 || s.LastRound != round.Round {
				tb.Errorf("region %s: %d aggregates accepted, %d refused, last round %d; want one of round %d accepted", s.Region, s.Accepted, s.Refused, s.LastRound, round.Round)
			}
		}
	}
	admin.Close()

	// stopped with SIGTERM: their whole lives' CPU
	for i, p := range regions {
		res.regions[i].total = p.stop(tb)
	}
	res.root.total = root.stop(tb)
	for i, p := range regionsNATS {
		res.regionsNATS[i].total = p.stop(tb)
	}
	res.rootNATS.total = rootSrv.stop(tb)

	cfg := fltest.CoordinatorConfig(filepath.Join(dir, "root"), f.reg, f.signer)
	if hier {
		cfg.Regions = f.regions
	}
	c, err := coordinator.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	fm, err := c.FloatModel(r.Result)
	if err != nil {
		tb.Fatal(err)
	}
	res.weights = fm.Net.Flat()
	return res
}

// fleetWait bounds each wait of a fleet round (EDGESCHED_FLEET_WAIT,
// default 30m).
var fleetWait = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("EDGESCHED_FLEET_WAIT")); err == nil && d > 0 {
		return d
	}
	return 30 * time.Minute
}()

// usages are the processes' procUsage.
func usages(tb testing.TB, ps []*fleetProc) []procUsage {
	tb.Helper()
	out := make([]procUsage, len(ps))
	for i, p := range ps {
		out[i] = p.usage(tb)
	}
	return out
}

// roundFigures are the processes' figures of a round that began at
// usages before.
func roundFigures(tb testing.TB, ps []*fleetProc, before []procUsage) []procFigures {
	tb.Helper()
	var out []procFigures
	for i, p := range ps {
		u := p.usage(tb)
		out = append(out, procFigures{name: p.name, cpu: u.cpu - before[i].cpu, peak: u.peak})
	}
	return out
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
	net, err := nn.NewNet(policy.NumFeatures, layers[0], layers[1], layers[2], rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		tb.Fatal(err)
	}
	f.start = &nn.Model{Schema: policy.NewSchema(), Net: net}
	return f
}

// regionSpread is the median and the largest of processes' round CPU and
// peak resident sets (the regions', or their NATS servers').
type regionSpread struct {
	cpuMed, cpuMax   time.Duration
	peakMed, peakMax uint64
}

func spread(ps []procFigures) regionSpread {
	if len(ps) == 0 {
		return regionSpread{}
	}
	cpus, peaks := make([]time.Duration, len(ps)), make([]uint64, len(ps))
	for i, p := range ps {
		cpus[i], peaks[i] = p.cpu, p.peak
	}
	slices.Sort(cpus)
	slices.Sort(peaks)
	// the upper median of an even count
	return regionSpread{cpus[len(cpus)/2], cpus[len(cpus)-1], peaks[len(peaks)/2], peaks[len(peaks)-1]}
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// logFleet logs a round's figures (a benchmark's log is cut after ten
// lines): the round, the bytes into the root and the senders' CPU; the
// root; its NATS server; each region; each region's NATS server.
func logFleet(tb testing.TB, name string, r fleetResult) {
	tb.Helper()
	tb.Logf("%-12s round %.2fs, root in %.2f MB (update bytes sent %.2f MB), senders' CPU %.2fs",
		name, r.elapsed.Seconds(), float64(r.rootIn)/(1<<20), float64(r.updates)/(1<<20), r.local.Seconds())
	per := ""
	if r.root.sites > 0 {
		per = fmt.Sprintf(", %.3f ms ingest CPU an update", r.rootIngest.Seconds()*1e3/float64(r.root.sites))
	}
	tb.Logf("  root: round CPU %.2fs (ingest %.2fs in %.2fs, closing %.2fs), VmHWM %.1f MB, whole life CPU %.2fs%s",
		r.root.cpu.Seconds(), r.rootIngest.Seconds(), r.ingest.Seconds(), (r.root.cpu - r.rootIngest).Seconds(), mb(r.root.peak), r.root.total.Seconds(), per)
	tb.Logf("  root's NATS server: round CPU %.2fs, VmHWM %.1f MB, whole life CPU %.2fs", r.rootNATS.cpu.Seconds(), mb(r.rootNATS.peak), r.rootNATS.total.Seconds())
	if len(r.regions) == 0 {
		return
	}
	line := func(ps []procFigures) string {
		var b strings.Builder
		for _, p := range ps {
			g, _, _ := strings.Cut(strings.TrimPrefix(p.name, "region "), "-")
			fmt.Fprintf(&b, " %s %.2fs/%.1fMB/%.2fs", g, p.cpu.Seconds(), mb(p.peak), p.total.Seconds())
		}
		return b.String()
	}
	var perUpdate []float64
	for _, p := range r.regions {
		perUpdate = append(perUpdate, p.cpu.Seconds()*1e3/float64(max(1, p.sites)))
	}
	slices.Sort(perUpdate)
	tb.Logf("  regions (round CPU/VmHWM/whole life CPU):%s; %.3f-%.3f ms CPU an update", line(r.regions), perUpdate[0], perUpdate[len(perUpdate)-1])
	tb.Logf("  regions' NATS servers:%s", line(r.regionsNATS))
}

// checkFigures fails tb unless every process's figures were recorded:
// some CPU in its life, at least the round's, and a peak resident set.
func checkFigures(tb testing.TB, r fleetResult) {
	tb.Helper()
	all := append([]procFigures{r.root, r.rootNATS}, r.regions...)
	for _, p := range append(all, r.regionsNATS...) {
		// /proc counts in ticks of 10 ms, rusage exactly: the round's
		// CPU may be a tick over the whole life's
		if p.total <= 0 || p.cpu < 0 || p.cpu > p.total+time.Second/clockTicks || p.peak == 0 {
			tb.Errorf("%s: round CPU %v of %v in all, VmHWM %d: want CPU and memory recorded", p.name, p.cpu, p.total, p.peak)
		}
	}
	if r.local <= 0 || r.rootIn <= 0 {
		tb.Errorf("senders' CPU %v, bytes into the root %d: want both recorded", r.local, r.rootIn)
	}
}

// TestFleetScaleSmall is the fleet-scale run in small (120 sites in 4
// regions, the small model; root and regions edge-coordinator processes,
// NATS servers nats-server processes): every site counted once, the
// hierarchical round's model is the flat one's bit for bit, the root
// receives fewer bytes, and every process's CPU and memory are recorded.
func TestFleetScaleSmall(t *testing.T) {
	f := newScaleFleet(t, 120, 4, [3]int{8, 8, 8})
	ff := writeFleetFiles(t, f)
	flat := fleetRound(t, f, ff, false)
	hier := fleetRound(t, f, ff, true)
	logFleet(t, "flat", flat)
	logFleet(t, "hierarchical", hier)
	checkFigures(t, flat)
	checkFigures(t, hier)
	if len(hier.regions) != 4 || len(hier.regionsNATS) != 4 || len(flat.regions)+len(flat.regionsNATS) != 0 {
		t.Errorf("%d+%d region processes flat, %d+%d hierarchical; want none and 4 aggregators with 4 NATS servers",
			len(flat.regions), len(flat.regionsNATS), len(hier.regions), len(hier.regionsNATS))
	}
	if !slices.Equal(flat.weights, hier.weights) {
		t.Fatalf("hierarchical model differs from the flat one in %d weights", countDiff(flat.weights, hier.weights))
	}
	// 120 updates of the small model against 4 aggregates, each about
	// 16 bytes a parameter and 90 a site: fewer bytes, whatever the sizes
	if hier.rootIn >= flat.rootIn {
		t.Errorf("hierarchical root took %d bytes, flat %d: want fewer", hier.rootIn, flat.rootIn)
	}
}

// BenchmarkFleetScale: EDGESCHED_FLEET_SITES sites (default 10,000) in 10
// regions, the 50,000-parameter model, one round flat and one
// hierarchical per iteration (run it with -benchtime 1x). Metrics per
// round: s/round; root-cpu-s and root-rss-MB (the root process: its
// round's CPU, its peak resident set), root-ingest-cpu-s (its CPU until
// the round stopped collecting); root-nats-cpu-s and root-nats-rss-MB
// (the root's NATS server); region-cpu-s-med/-max and
// region-rss-MB-med/-max (the regional aggregator processes'), and
// region-nats-* (their NATS servers'); senders-cpu-s (this process: the
// senders' signing and publishing); root-in-MB (bytes into the root's
// NATS server).
func BenchmarkFleetScale(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("EDGESCHED_FLEET_SITES")); err == nil && v > 0 {
		n = v
	}
	f := newScaleFleet(b, n, 10, tpLayers)
	ff := writeFleetFiles(b, f)
	for _, hier := range []bool{false, true} {
		name := "flat"
		if hier {
			name = "hierarchical"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				r := fleetRound(b, f, ff, hier)
				logFleet(b, name, r)
				checkFigures(b, r)
				b.ReportMetric(r.elapsed.Seconds(), "s/round")
				b.ReportMetric(r.root.cpu.Seconds(), "root-cpu-s")
				b.ReportMetric(r.rootIngest.Seconds(), "root-ingest-cpu-s")
				b.ReportMetric(mb(r.root.peak), "root-rss-MB")
				b.ReportMetric(r.rootNATS.cpu.Seconds(), "root-nats-cpu-s")
				b.ReportMetric(mb(r.rootNATS.peak), "root-nats-rss-MB")
				if hier {
					for _, m := range []struct {
						unit string
						ps   []procFigures
					}{{"region", r.regions}, {"region-nats", r.regionsNATS}} {
						s := spread(m.ps)
						b.ReportMetric(s.cpuMed.Seconds(), m.unit+"-cpu-s-med")
						b.ReportMetric(s.cpuMax.Seconds(), m.unit+"-cpu-s-max")
						b.ReportMetric(mb(s.peakMed), m.unit+"-rss-MB-med")
						b.ReportMetric(mb(s.peakMax), m.unit+"-rss-MB-max")
					}
				}
				b.ReportMetric(r.local.Seconds(), "senders-cpu-s")
				b.ReportMetric(float64(r.rootIn)/(1<<20), "root-in-MB")
			}
		})
	}
}

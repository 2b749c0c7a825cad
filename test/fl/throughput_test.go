//go:build unix

package fl

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// The acceptance benchmark: coordinator aggregation throughput for a
// 50k-parameter model with 1,000 sites on loopback. Every iteration is one
// synchronous round: the sites' signed int8 updates (encoded before the
// timer starts) are published to the JetStream update stream with their
// MsgIDs, as agents publish them, and the timer stops once the coordinator
// has accepted all of them, aggregated, stored and published the new
// model. Everything runs in this process (NATS server included), so the
// heap figures cover the server's buffers too.

// tpLayers are the hidden sizes giving exactly 50,000 parameters with
// policy.NumFeatures (45) inputs: 45*125+125 + 125*124+124 + 124+1 +
// 248*114+114 + 114+1 (44 inputs had 119, 123, 120; 41 had 112, 128,
// 119).
// TestThroughputHarness checks the count, so a new feature schema cannot
// silently break the benchmark.
var tpLayers = [3]int{125, 124, 114}

const tpParams = 50_000

// tpOptions configure a throughput run.
type tpOptions struct {
	sites  int
	layers [3]int
	rule   string
	// payloads stores every update's payload (coordinator
	// Config.StorePayloads), as FedAvg rounds did before summing rounds
	payloads bool
}

// tpRig is a running coordinator on an embedded NATS server with a
// publisher connection and the sites' keys.
type tpRig struct {
	tb     testing.TB
	c      *coordinator.Coordinator
	js     jetstream.JetStream
	sites  []string
	keys   []*quant.Signer
	params int
}

// tpRound is one round's pre-encoded updates.
type tpRound struct {
	round *coordinator.Round
	msgs  [][]byte
	bytes int64
}

// tpResult is what one timed round measured.
type tpResult struct {
	elapsed   time.Duration // publish of the first update to the model on the bus
	ingest    time.Duration // publish of the first update to the round's close (all accepted)
	accepted  int
	version   uint64
	heapPeak  uint64        // peak in-use heap bytes while timed
	heapStart uint64        // in-use heap bytes when the timer started
	cpu       time.Duration // CPU time of the process (user + system) while timed
	commits   float64       // coordinator.db write transactions while timed
	syncs     float64       // fdatasyncs of coordinator.db while timed
}

// cpuTime is the CPU time the process used so far (0 where unsupported).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func tpKey(tb testing.TB, seed int) *quant.Signer {
	tb.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 0x7b}))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// tpSetup starts NATS and a coordinator with the start model registered
// (no round open yet).
func tpSetup(tb testing.TB, o tpOptions) *tpRig {
	tb.Helper()
	srv := fltest.StartNATS(tb)
	reg := &federated.Registry{}
	rig := &tpRig{tb: tb}
	for i := range o.sites {
		s := fmt.Sprintf("site-%04d", i)
		k := tpKey(tb, i+1)
		if err := reg.Add(s, k.Public()); err != nil {
			tb.Fatal(err)
		}
		rig.sites, rig.keys = append(rig.sites, s), append(rig.keys, k)
	}
	net, err := nn.NewNet(policy.NumFeatures, o.layers[0], o.layers[1], o.layers[2], rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		tb.Fatal(err)
	}
	rig.params = net.NumParams()

	cfg := fltest.CoordinatorConfig(tb.TempDir(), reg, tpKey(tb, 50_000))
	// 256 random feature rows keep the quantization of every new model cheap
	cfg.Calibrate, cfg.Aggregator.Rule = fltest.NormalRows(256, 7), o.rule
	cfg.MinUpdates, cfg.AutoRounds, cfg.AutoPublish = o.sites, false, true
	cfg.StorePayloads = o.payloads
	cfg.PollInterval = 50 * time.Millisecond
	c, _ := fltest.RunCoordinator(tb, srv.ClientURL(), cfg, &nn.Model{Schema: policy.NewSchema(), Net: net})
	rig.c = c
	// Run publishes the bootstrap model once its bus is up.
	tpWait(tb, 30*time.Second, "bootstrap model published", func() (bool, error) {
		m, err := c.ModelRecord(1)
		return err == nil && m.Status == coordinator.ModelPublished, nil
	})
	if rig.js, err = jetstream.New(fltest.Connect(tb, srv.ClientURL(), "sites")); err != nil {
		tb.Fatal(err)
	}
	return rig
}

// tpWait polls cond every millisecond until it holds, fails or the
// deadline passes.
func tpWait(tb testing.TB, within time.Duration, what string, cond func() (bool, error)) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		switch {
		case err != nil:
			tb.Fatalf("waiting for %s: %v", what, err)
		case ok:
			return
		case time.Now().After(deadline):
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// prepare opens the next round and encodes every site's signed int8
// update for it (in parallel; seq = round, so MsgIDs are fresh).
func (rig *tpRig) prepare() *tpRound {
	tb := rig.tb
	tb.Helper()
	r, err := rig.c.StartRound(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	out := &tpRound{round: r, msgs: make([][]byte, len(rig.sites))}
	errs := make([]error, len(rig.sites))
	var wg sync.WaitGroup
	work := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			delta := make([]float32, rig.params)
			for i := range work {
				rng := rand.New(rand.NewPCG(uint64(i), r.Round))
				for j := range delta {
					delta[j] = float32(0.01 * rng.NormFloat64())
				}
				payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: delta}, esu.DefaultOptions(uint64(i)<<32|r.Round))
				if err == nil {
					out.msgs[i], err = federated.EncodeUpdateMsg(federated.UpdateHeader{Site: rig.sites[i], Seq: r.Round, Round: r.Round,
						BaseModel: r.BaseModel, BaseVersion: r.BaseVersion, Samples: int64(100 + i%50), Created: time.Now().UTC()}, payload, rig.keys[i])
				}
				errs[i] = err
			}
		})
	}
	for i := range rig.sites {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	for _, m := range out.msgs {
		out.bytes += int64(len(m))
	}
	return out
}

// heapInUse is runtime.MemStats.HeapInuse (objects plus the free space of
// in-use spans) read through runtime/metrics, which does not stop the
// world.
func heapInUse(s []metrics.Sample) uint64 {
	metrics.Read(s)
	var n uint64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			n += x.Value.Uint64()
		}
	}
	return n
}

// sampleHeap samples heapInUse every interval until the returned
// function is called; it returns the peak (calling it again returns the
// same).
func sampleHeap(every time.Duration) func() uint64 {
	stop, sampled := make(chan struct{}), make(chan uint64, 1)
	go func() {
		s := heapSamples()
		peak := heapInUse(s)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			peak = max(peak, heapInUse(s))
			select {
			case <-stop:
				sampled <- peak
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	var peak uint64
	return func() uint64 {
		once.Do(func() { close(stop); peak = <-sampled })
		return peak
	}
}

func heapSamples() []metrics.Sample {
	return []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
}

// run publishes a prepared round and waits until its model is published:
// the timed part of the benchmark.
func (rig *tpRig) run(p *tpRound) tpResult {
	tb := rig.tb
	tb.Helper()
	var res tpResult
	// sample the heap every 2ms until the round is done
	res.heapStart = heapInUse(heapSamples())
	peak := sampleHeap(2 * time.Millisecond)
	defer peak() // a failed round stops the sampler too

	commits0 := scrape(tb, rig.c, "edgesched_coordinator_store_commits_total", "")
	syncs0 := scrape(tb, rig.c, "edgesched_coordinator_store_fsyncs_total", "")
	prof := startTPProfile(tb)
	defer prof.stop()
	cpu0, start := cpuTime(), time.Now()
	futures := make([]jetstream.PubAckFuture, len(p.msgs))
	for i, m := range p.msgs {
		f, err := rig.js.PublishAsync(federated.UpdateSubjectPrefix+rig.sites[i], m,
			jetstream.WithMsgID(federated.MsgID(rig.sites[i], p.round.Round)), jetstream.WithExpectStream(federated.UpdateStream))
		if err != nil {
			tb.Fatalf("publish update of %s: %v", rig.sites[i], err)
		}
		futures[i] = f
	}
	select {
	case <-rig.js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		tb.Fatal("stream did not acknowledge the updates")
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			tb.Fatalf("update of %s not stored: %v", rig.sites[i], err)
		}
	}
	// Poll the model registry's newest record (a small JSON document)
	// every millisecond; the round record (its JSON lists all expected
	// sites) only every 25ms, to notice a failed round: polling it every
	// millisecond would compete for the CPU with the coordinator.
	next := time.Now()
	tpWait(tb, 10*time.Minute, fmt.Sprintf("round %d published", p.round.Round), func() (bool, error) {
		m, err := rig.c.ModelRecord(0)
		if err != nil {
			return false, err
		}
		if m.Round == p.round.Round && m.Status == coordinator.ModelPublished {
			return true, nil
		}
		if time.Now().After(next) {
			next = time.Now().Add(25 * time.Millisecond)
			r, err := rig.c.RoundRecord(p.round.Round)
			if err == nil && r.State == coordinator.StateFailed {
				err = fmt.Errorf("round %d failed: %s", r.Round, r.Note)
			}
			return false, err
		}
		return false, nil
	})
	res.elapsed, res.cpu = time.Since(start), cpuTime()-cpu0
	prof.stop()
	res.commits = scrape(tb, rig.c, "edgesched_coordinator_store_commits_total", "") - commits0
	res.syncs = scrape(tb, rig.c, "edgesched_coordinator_store_fsyncs_total", "") - syncs0
	res.heapPeak = peak()
	r, err := rig.c.RoundRecord(p.round.Round)
	if err != nil {
		tb.Fatal(err)
	}
	if r.State != coordinator.StatePublished {
		tb.Fatalf("round %d is %s after its model was published", r.Round, r.State)
	}
	res.ingest = r.Closed.Sub(start)
	res.accepted, res.version = r.Accepted, r.Result
	if res.accepted != len(rig.sites) {
		tb.Fatalf("round %d: %d updates accepted, want %d", r.Round, res.accepted, len(rig.sites))
	}
	return res
}

// BenchmarkCoordinatorThroughput: 1,000 sites send signed int8 updates of
// a 50,000-parameter model over loopback NATS; one round per iteration.
// Metrics: updates/s (publish of the first update to the new model on
// the bus), ingest-updates/s (to the round's close: every update judged,
// committed and acked; compare it with BenchmarkUpdateStreamFloor's
// updates/s, publish to fetched and acked), MB/s (update message bytes,
// NATS framing aside),
// ns/update, ingest-ms and aggregate-ms per round (publish to round close;
// close to model on the bus), cpu-ms per round (user and system CPU time
// of the whole process, NATS server included: steadier than wall time on
// a shared machine), MB-peak (peak in-use heap of the process,
// NATS server and the round's pre-encoded messages included) and
// MB-peak-delta (its rise over the heap when the timer started), and
// commits/round (coordinator.db write transactions per round: the update
// verdicts are committed in groups) and fsyncs/round (bbolt's fdatasyncs
// of coordinator.db: two a commit, one a growth of the file; the
// coordinator's store_fsyncs_total).
//
// fedavg is a summing round (the updates' running sums stored, not their
// payloads); fedavg-payloads the same rule storing every payload
// (Config.StorePayloads: how FedAvg rounds ran before); median a robust
// rule, which needs every payload.
func BenchmarkCoordinatorThroughput(b *testing.B) {
	const sites = 1000
	for _, v := range []struct {
		name     string
		rule     string
		payloads bool
	}{{"fedavg", federated.RuleFedAvg, false}, {"fedavg-payloads", federated.RuleFedAvg, true}, {"median", federated.RuleMedian, false}} {
		b.Run(v.name, func(b *testing.B) {
			rig := tpSetup(b, tpOptions{sites: sites, layers: tpLayers, rule: v.rule, payloads: v.payloads})
			if rig.params != tpParams {
				b.Fatalf("model has %d parameters, want %d", rig.params, tpParams)
			}
			var (
				rounds, updates, wire int64
				elapsed, ingest, cpu  time.Duration
				peak, peakDelta       uint64
				commits, syncs        float64
			)
			for b.Loop() {
				b.StopTimer()
				p := rig.prepare()
				runtime.GC() // the previous round's garbage is not this round's
				b.StartTimer()
				res := rig.run(p)
				b.StopTimer()
				rounds++
				updates += int64(len(p.msgs))
				wire += p.bytes
				elapsed += res.elapsed
				ingest += res.ingest
				cpu += res.cpu
				commits += res.commits
				syncs += res.syncs
				peak = max(peak, res.heapPeak)
				peakDelta = max(peakDelta, res.heapPeak-res.heapStart)
				b.StartTimer()
			}
			sec := elapsed.Seconds()
			b.ReportMetric(float64(updates)/sec, "updates/s")
			// publish to the round's close, every update judged and
			// committed: the figure to compare with BenchmarkUpdateStreamFloor
			b.ReportMetric(float64(updates)/ingest.Seconds(), "ingest-updates/s")
			b.ReportMetric(float64(wire)/1e6/sec, "MB/s")
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(updates), "ns/update")
			b.ReportMetric(float64(ingest.Milliseconds())/float64(rounds), "ingest-ms")
			b.ReportMetric(float64((elapsed-ingest).Milliseconds())/float64(rounds), "aggregate-ms")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(rounds), "cpu-ms")
			b.ReportMetric(float64(peak)/1e6, "MB-peak")
			b.ReportMetric(float64(peakDelta)/1e6, "MB-peak-delta")
			b.ReportMetric(commits/float64(rounds), "commits/round")
			b.ReportMetric(syncs/float64(rounds), "fsyncs/round")
			b.Logf("%d parameters, %d sites, %d rounds, %.1f KB per update", rig.params, sites, rounds, float64(wire)/float64(updates)/1e3)
		})
	}
}

// TestThroughputHarness runs the benchmark's code path on a small
// configuration: two rounds of 20 sites, every update accepted, every
// round's model published.
func TestThroughputHarness(t *testing.T) {
	const sites = 20
	net, err := nn.NewNet(policy.NumFeatures, tpLayers[0], tpLayers[1], tpLayers[2], rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if net.NumParams() != tpParams {
		t.Fatalf("the benchmark's layers %v give a network of %d parameters, want %d: recompute tpLayers for %d features", tpLayers, net.NumParams(), tpParams, policy.NumFeatures)
	}
	rig := tpSetup(t, tpOptions{sites: sites, layers: [3]int{8, 8, 8}, rule: federated.RuleFedAvg})
	for round := uint64(1); round <= 2; round++ {
		p := rig.prepare()
		if p.round.Round != round || len(p.msgs) != sites || p.bytes == 0 {
			t.Fatalf("prepared round %d with %d messages (%d bytes), want round %d", p.round.Round, len(p.msgs), p.bytes, round)
		}
		res := rig.run(p)
		if res.accepted != sites || res.version != round+1 {
			t.Fatalf("round %d: %d accepted, model version %d", round, res.accepted, res.version)
		}
		if res.elapsed <= 0 || res.ingest <= 0 || res.ingest > res.elapsed || res.heapPeak == 0 {
			t.Fatalf("round %d: implausible measurements %+v", round, res)
		}
	}
	rejects, err := rig.c.Rejects()
	if err != nil {
		t.Fatal(err)
	}
	for reason, n := range rejects {
		if n > 0 {
			t.Errorf("%d updates rejected (%s)", n, reason)
		}
	}
	m, err := rig.c.ModelRecord(0)
	if err != nil || m.Version != 3 || m.Status != coordinator.ModelPublished {
		t.Fatalf("newest model %+v %v, want version 3 published", m, err)
	}
}

// BenchmarkUpdateStreamFloor is what the embedded NATS server alone costs
// for one benchmark round: 1,000 messages of an update's size (50,700
// bytes) published with MsgIDs to a file-stored stream shaped like the
// update stream, fetched by a durable pull consumer (batches of 256, 16
// MiB) and acked, nothing verified or stored. Run beside
// BenchmarkCoordinatorThroughput (make bench): on a 2-core machine the
// server shares the cores with the coordinator, and this floor bounds the
// coordinator's updates/s from above.
func BenchmarkUpdateStreamFloor(b *testing.B) {
	const sites, size = 1000, 50_700
	srv := fltest.StartNATS(b)
	ctx := context.Background()
	js, err := jetstream.New(fltest.Connect(b, srv.ClientURL(), "sites"))
	if err != nil {
		b.Fatal(err)
	}
	jc, err := jetstream.New(fltest.Connect(b, srv.ClientURL(), "consumer"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FLOOR", Subjects: []string{"floor.*"}, Storage: jetstream.FileStorage,
		Duplicates: time.Hour, MaxMsgSize: federated.MaxUpdateBytes}); err != nil {
		b.Fatal(err)
	}
	cons, err := jc.CreateConsumer(ctx, "FLOOR", jetstream.ConsumerConfig{Durable: "floor", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxAckPending: 4096})
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, size)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range msg {
		msg[i] = byte(rng.Uint32())
	}
	var (
		elapsed, cpu time.Duration
		rounds       int
	)
	for b.Loop() {
		runtime.GC()
		cpu0, start := cpuTime(), time.Now()
		for i := range sites {
			if _, err := js.PublishAsync(fmt.Sprintf("floor.site-%04d", i), msg, jetstream.WithMsgID(fmt.Sprintf("%d-%d", rounds, i))); err != nil {
				b.Fatal(err)
			}
		}
		for got := 0; got < sites; {
			// never more than what is still to come: a pull request for
			// more would wait out its expiry for messages that never come
			// (500 ms of idle time the coordinator does not pay)
			batch, err := cons.Fetch(min(256, sites-got), jetstream.FetchMaxBytes(16<<20), jetstream.FetchMaxWait(500*time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			for m := range batch.Messages() {
				if err := m.Ack(); err != nil {
					b.Fatal(err)
				}
				got++
			}
			if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(2 * time.Minute):
			b.Fatal("stream did not acknowledge the messages")
		}
		elapsed, cpu, rounds = elapsed+time.Since(start), cpu+cpuTime()-cpu0, rounds+1
	}
	b.ReportMetric(float64(sites*rounds)/elapsed.Seconds(), "updates/s")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(rounds), "cpu-ms")
}

package fl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/coordcmd"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/test/internal/boltcheck"
	"github.com/edgesched/edgesched/test/internal/gobuild"
)

// crashSites and crashRounds size every run of the crash test: three sites
// train two synchronous rounds, so the registry goes from version 1 (the
// bootstrap model) to version 3.
const (
	crashSites  = 3
	crashRounds = 2
	crashFinal  = 1 + crashRounds
)

// crashRandomKills is how many runs are killed at seeded random moments.
const crashRandomKills = 3

// crashSeedEnv overrides the seed of the random-moment kills (the test logs
// the seed it used, so a failure can be replayed).
const crashSeedEnv = "EDGESCHED_CRASH_SEED"

// TestCoordinatorCrashRecovery: the edge-coordinator process is killed
// with SIGKILL (like kill -9) in the middle of a round, at each of the
// coordinator's failpoints and at seeded random moments, and restarted on
// the same data directory (with what the killed process had fetched and
// not acked redelivered at once, as after the consumer's AckWait). Each
// time the rounds finish with models
// bit-identical (same content IDs, same weights) to an uninterrupted run of
// the same sites and the same seeds; every site's update is applied exactly
// once per round (none twice, none lost); the model versions on the bus and
// at the sites only move forward; and the bbolt file the kill left behind,
// and the final one, pass bbolt's consistency check.
func TestCoordinatorCrashRecovery(t *testing.T) {
	bin := buildEdgeCoordinator(t)
	start := time.Now()
	ref := runCrashScenario(t, bin, crashKill{})
	t.Logf("reference run (no kill): %v; versions %s", ref.elapsed.Round(time.Millisecond), ref.describe())

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, s, err)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 0xc7a5))
	// anywhere from the coordinator's start to the end of an uninterrupted run
	var randomAt []time.Duration
	for range crashRandomKills {
		randomAt = append(randomAt, time.Duration(rng.Int64N(int64(ref.elapsed)+1)))
	}
	t.Logf("random kills: seed %d (replay with %s=%d): SIGKILL at %v after start", seed, crashSeedEnv, seed, randomAt)

	cases := []struct {
		name string
		kill crashKill
	}{
		// the second update is recorded, not yet acked on the stream
		{"update.committed:2", crashKill{failpoint: coordinator.FailUpdateCommitted + ":2"}},
		// the round's last update is recorded, the round not yet closed
		{"update.committed:3", crashKill{failpoint: coordinator.FailUpdateCommitted + ":3"}},
		// round 1 marked aggregating, nothing aggregated
		{"round.closed", crashKill{failpoint: coordinator.FailRoundClosed}},
		// round 1's model stored, not yet on the bus
		{"model.stored", crashKill{failpoint: coordinator.FailModelStored}},
		// the bootstrap model on the bus, before the first round opens
		{"model.published", crashKill{failpoint: coordinator.FailModelPublished}},
		// round 1's model on the bus, round 2 not yet opened
		{"model.published:2", crashKill{failpoint: coordinator.FailModelPublished + ":2"}},
	}
	for i, at := range randomAt {
		cases = append(cases, struct {
			name string
			kill crashKill
		}{fmt.Sprintf("random-%d", i+1), crashKill{after: at, random: true}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := runCrashScenario(t, bin, tc.kill)
			t.Logf("killed and restarted: %v; versions %s", got.elapsed.Round(time.Millisecond), got.describe())
			compareCrashRuns(t, ref, got)
		})
	}
	t.Logf("crash test: %v in all", time.Since(start).Round(time.Millisecond))
}

// buildEdgeCoordinator builds cmd/edge-coordinator into the test's
// temporary directory (the Go build cache makes this quick), or skips the
// test when there is no go tool.
func buildEdgeCoordinator(t *testing.T) string {
	t.Helper()
	return gobuild.Build(t, t.TempDir(), "./cmd/edge-coordinator")[0]
}

// crashKill says how a run is interrupted: at a failpoint (NAME[:N], see
// coordcmd.FailpointEnv), or by the test's SIGKILL a fixed time after the
// start (random). The zero value is the uninterrupted reference run.
type crashKill struct {
	failpoint string
	after     time.Duration
	random    bool
}

func (k crashKill) kills() bool { return k.failpoint != "" || k.random }

// crashResult is what a run produced.
type crashResult struct {
	elapsed time.Duration
	models  map[uint64]coordinator.Model // by version
	weights map[uint64][]float32         // float weights by version
}

func (r crashResult) describe() string {
	var parts []string
	for v := uint64(1); v <= crashFinal; v++ {
		m := r.models[v]
		parts = append(parts, fmt.Sprintf("v%d float %s int8 %s", v, quant.ShortID(m.FloatModel), quant.ShortID(m.Int8Model)))
	}
	return strings.Join(parts, ", ")
}

// compareCrashRuns checks that the round models of a run are bit-identical
// to the reference's. (The bootstrap model's content is the same too; its
// creation time is not part of the content ID.)
func compareCrashRuns(t *testing.T, ref, got crashResult) {
	t.Helper()
	for v := uint64(1); v <= crashFinal; v++ {
		rm, gm := ref.models[v], got.models[v]
		if rm.FloatModel != gm.FloatModel || rm.Int8Model != gm.Int8Model {
			t.Errorf("version %d: float %s int8 %s, the uninterrupted run made float %s int8 %s",
				v, quant.ShortID(gm.FloatModel), quant.ShortID(gm.Int8Model), quant.ShortID(rm.FloatModel), quant.ShortID(rm.Int8Model))
		}
		rw, gw := ref.weights[v], got.weights[v]
		if len(rw) != len(gw) {
			t.Errorf("version %d: %d weights, the uninterrupted run has %d", v, len(gw), len(rw))
			continue
		}
		for i := range rw {
			if math.Float32bits(rw[i]) != math.Float32bits(gw[i]) {
				t.Errorf("version %d: weight %d is %v, the uninterrupted run has %v", v, i, gw[i], rw[i])
				break
			}
		}
	}
}

// coordProc is an edge-coordinator child process.
type coordProc struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error // set before done closes
	logPath string
}

// logOnFailure logs the edge-coordinator processes' log at logPath when
// the test failed.
func logOnFailure(t *testing.T, logPath string) {
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("edge-coordinator log:\n%s", b)
			}
		}
	})
}

func startCoordProc(t *testing.T, bin string, args []string, failpoint, logPath string) *coordProc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, coordcmd.FailpointEnv+"=") {
			env = append(env, kv)
		}
	}
	if failpoint != "" {
		env = append(env, coordcmd.FailpointEnv+"="+failpoint)
	}
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
	fmt.Fprintf(logf, "=== start %s (failpoint %q)\n", strings.Join(args, " "), failpoint)
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start edge-coordinator: %v", err)
	}
	p := &coordProc{cmd: cmd, done: make(chan struct{}), logPath: logPath}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *coordProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// killedBySIGKILL reports whether the process ended by SIGKILL.
func (p *coordProc) killedBySIGKILL() bool {
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// waitExit waits for the process to end.
func (p *coordProc) waitExit(t *testing.T, within time.Duration, what string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("edge-coordinator did not exit within %v (%s)", within, what)
	}
}

// stop ends the process with SIGTERM and expects a clean exit.
func (p *coordProc) stop(t *testing.T) {
	t.Helper()
	if p.exited() {
		t.Fatalf("edge-coordinator exited on its own: %v", p.waitErr)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitExit(t, 15*time.Second, "after SIGTERM")
	if p.waitErr != nil {
		t.Fatalf("edge-coordinator stopped with %v", p.waitErr)
	}
}

// crashAgent is an in-process site client that records every model
// version it installs.
type crashAgent struct {
	*agent
	site     string
	mu       sync.Mutex
	versions []uint64
}

func (a *crashAgent) installed() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.versions)
}

// startCrashAgent is startAgent with the install hook registered before
// the client runs. Its trainer is deterministic (no noise).
func (f *fleet) startCrashAgent(site, dir string) *crashAgent {
	t := f.t
	ca := &crashAgent{site: site}
	c, err := flclient.New(f.agentConfig(site, dir, f.synthetic(0)))
	if err != nil {
		t.Fatal(err)
	}
	c.OnModel(func(in flclient.Installed) {
		ca.mu.Lock()
		ca.versions = append(ca.versions, in.Version)
		ca.mu.Unlock()
	})
	ca.agent = f.runAgent(site, c)
	return ca
}

// verdicts counts the coordinator's answers the agent received.
func verdicts(st flclient.Status) int {
	n := st.Counters.Accepted + st.Counters.Duplicate
	for _, v := range st.Counters.Rejected {
		n += v
	}
	return n
}

// busLog records the state bucket's puts (round announcements and model
// notices) in the order the server took them.
type busLog struct {
	mu      sync.Mutex
	notices []federated.ModelNotice
	rounds  []federated.RoundAnnouncement
	bad     []string
}

func watchStateBucket(t *testing.T, url string) *busLog {
	t.Helper()
	nc := fltest.Connect(t, url, "crash-watcher")
	l := &busLog{}
	prefix := "$KV." + federated.StateBucket + "."
	sub, err := nc.Subscribe(prefix+">", func(m *nats.Msg) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(m.Data) == 0 {
			return // a delete or purge marker
		}
		switch strings.TrimPrefix(m.Subject, prefix) {
		case federated.KeyModel:
			n, err := federated.DecodeModelNotice(m.Data)
			if err != nil {
				l.bad = append(l.bad, err.Error())
				return
			}
			l.notices = append(l.notices, *n)
		case federated.KeyRound:
			a, err := federated.DecodeAnnouncement(m.Data)
			if err != nil {
				l.bad = append(l.bad, err.Error())
				return
			}
			l.rounds = append(l.rounds, *a)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return l
}

// check: model versions and rounds on the bus never go back, and a version
// or round announced again is announced with the same content.
func (l *busLog) check(t *testing.T) {
	t.Helper()
	l.checkUpTo(t, crashFinal, crashRounds)
}

// checkUpTo is check for a run that ends at model version final and round
// lastRound.
func (l *busLog) checkUpTo(t *testing.T, final, lastRound uint64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.bad {
		t.Errorf("undecodable state bucket entry: %s", b)
	}
	seen := map[uint64]federated.ModelNotice{}
	var last uint64
	var versions []uint64
	for _, n := range l.notices {
		versions = append(versions, n.Version)
		if n.Version < last {
			t.Errorf("model version went back on the bus: %v", versions)
		}
		last = max(last, n.Version)
		if prev, ok := seen[n.Version]; ok && (prev.FloatModel != n.FloatModel || prev.Int8Model != n.Int8Model) {
			t.Errorf("version %d announced as two different models: %s and %s", n.Version, quant.ShortID(prev.FloatModel), quant.ShortID(n.FloatModel))
		}
		seen[n.Version] = n
	}
	if last != final {
		t.Errorf("model notices on the bus %v, want them to end at version %d", versions, final)
	}
	rounds := map[uint64]federated.RoundAnnouncement{}
	var maxRound uint64
	for _, a := range l.rounds {
		if a.Round < maxRound {
			t.Errorf("round announcements went back: round %d after %d", a.Round, maxRound)
		}
		maxRound = max(maxRound, a.Round)
		if prev, ok := rounds[a.Round]; ok && (prev.BaseModel != a.BaseModel || prev.BaseVersion != a.BaseVersion || !prev.Deadline.Equal(a.Deadline)) {
			t.Errorf("round %d announced twice differently: %+v then %+v", a.Round, prev, a)
		}
		rounds[a.Round] = a
	}
	if maxRound != lastRound {
		t.Errorf("last round announced %d, want %d", maxRound, lastRound)
	}
	t.Logf("bus: %d model notices %v, %d round announcements", len(l.notices), versions, len(l.rounds))
}

// redeliverNow resets the coordinator's durable consumer to its ack floor,
// as if the AckWait of what the killed process had fetched but not acked
// had run out: the restarted coordinator gets those updates again at once
// (a redelivery of an update it already recorded must change nothing).
func redeliverNow(t *testing.T, url string) {
	t.Helper()
	nc := fltest.Connect(t, url, "crash-reset")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, federated.UpdateStream, "coordinator")
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Logf("no update consumer yet: nothing to redeliver")
		return
	}
	if err != nil {
		t.Fatalf("update consumer: %v", err)
	}
	pending := cons.CachedInfo().NumAckPending
	if v := nc.ConnectedServerVersion(); !serverAtLeast(v, 2, 14) {
		// no consumer reset API before 2.14: the restarted coordinator
		// re-creates its consumer from the ack floor itself
		t.Logf("nats-server %s has no consumer reset: %d updates not acked are left to the restarted coordinator", v, pending)
		return
	}
	res, err := js.ResetConsumer(ctx, federated.UpdateStream, "coordinator")
	if err != nil {
		t.Fatalf("reset the update consumer: %v", err)
	}
	t.Logf("update consumer reset to stream sequence %d: %d updates the killed coordinator had not acked come again", res.ResetSeq, pending)
}

// waitServing waits until the coordinator process answers on its admin
// API (it has recovered and handles signals), failing should it exit.
func waitServing(t *testing.T, url string, p *coordProc) {
	t.Helper()
	nc := fltest.Connect(t, url, "crash-probe")
	defer nc.Close()
	fltest.Eventually(t, 20*time.Second, "the restarted coordinator to serve", func() (bool, string) {
		if p.exited() {
			t.Fatalf("edge-coordinator exited: %v", p.waitErr)
		}
		_, err := nc.Request(federated.AdminSubjectPrefix+"."+coordinator.EndpointRoundList, []byte("{}"), 200*time.Millisecond)
		return err == nil, fmt.Sprint(err)
	})
}

// checkBolt runs bbolt's consistency check over a coordinator.db (none
// yet: the kill came before the coordinator made it, nothing to check).
func checkBolt(t *testing.T, path, when string) {
	t.Helper()
	err := boltcheck.Check(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Logf("no coordinator.db %s: nothing to check", when)
		return
	}
	if err != nil {
		t.Fatalf("bbolt check of coordinator.db %s: %v", when, err)
	}
}

// auditCounts counts the audit log's events by kind and subject (round,
// site or version), read straight from the store.
func auditCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int{}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		if b == nil {
			return errors.New("no audit bucket")
		}
		return b.ForEach(func(_, v []byte) error {
			e, err := store.DecodeEvent(v)
			if err != nil {
				return err
			}
			switch e.Kind {
			case "update.accepted":
				out[fmt.Sprintf("%s round %d %s", e.Kind, e.Round, e.Site)]++
			case "round.aggregated":
				out[fmt.Sprintf("%s round %d", e.Kind, e.Round)]++
			case "model.stored":
				// "version N (...)"
				v, _, _ := strings.Cut(strings.TrimPrefix(e.Detail, "version "), " ")
				out[e.Kind+" version "+v]++
			default:
				out[e.Kind]++
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	return out
}

// runCrashScenario runs the coordinator binary with three in-process sites
// for crashRounds rounds, interrupted as kill says, and checks the
// invariants that do not need the reference run.
func runCrashScenario(t *testing.T, bin string, kill crashKill) crashResult {
	t.Helper()
	return runCrashScenarioOn(t, bin, kill, fltest.StartNATS(t).ClientURL())
}

// runCrashScenarioOn is runCrashScenario on the NATS server at url (its
// own: the scenario creates the stream and buckets).
func runCrashScenarioOn(t *testing.T, bin string, kill crashKill, url string) crashResult {
	t.Helper()
	f := newFleet(t, url, crashSites)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	dbPath := filepath.Join(dataDir, "coordinator.db")
	logPath := filepath.Join(dir, "edge-coordinator.log")
	args := append(coordProcArgs(t, f, dir, url, crashRounds), "--data", dataDir)
	logOnFailure(t, logPath)
	bus := watchStateBucket(t, url)

	began := time.Now()
	proc := startCoordProc(t, bin, args, kill.failpoint, logPath)
	if kill.random {
		timer := time.AfterFunc(kill.after, func() { _ = proc.cmd.Process.Signal(syscall.SIGKILL) })
		t.Cleanup(func() { timer.Stop() })
	}
	// Sites join one at a time, each once the previous one's round-1
	// update got its verdict (or the coordinator died), so a failpoint
	// hits a known update.
	var agents []*crashAgent
	joinSites := func(p *coordProc) {
		for len(agents) < len(f.sites) {
			s := f.sites[len(agents)]
			a := f.startCrashAgent(s, filepath.Join(dir, "agents", s))
			agents = append(agents, a)
			fltest.Eventually(t, 30*time.Second, s+"'s first verdict or the coordinator's death", func() (bool, string) {
				st, err := a.c.Status()
				return p.exited() || (err == nil && verdicts(st) > 0), fmt.Sprintf("%+v %v", st, err)
			})
			if p.exited() {
				return
			}
		}
	}
	joinSites(proc)
	if kill.kills() {
		// a failpoint must be reached; the random kill comes when it comes
		proc.waitExit(t, 30*time.Second, "waiting for the kill")
		if !proc.killedBySIGKILL() {
			t.Fatalf("edge-coordinator ended with %v, want death by SIGKILL", proc.waitErr)
		}
		t.Logf("edge-coordinator killed %v after start, with %d of %d sites joined", time.Since(began).Round(time.Millisecond), len(agents), len(f.sites))
		checkBolt(t, dbPath, "as the kill left it")
		redeliverNow(t, url)
		proc = startCoordProc(t, bin, args, "", logPath)
		waitServing(t, url, proc)
		joinSites(proc)
	}
	// Every site installs the final version, has sent everything and got
	// a verdict on each update: a failpoint kills before the update being
	// handled is acked on the stream, so it comes again and is answered;
	// a random kill may also fall between that ack and the answer to the
	// site, losing one verdict.
	wantVerdicts := crashSites * crashRounds
	if kill.random {
		wantVerdicts--
	}
	fltest.Eventually(t, 30*time.Second, fmt.Sprintf("every site on version %d", crashFinal), func() (bool, string) {
		if proc.exited() {
			t.Fatalf("edge-coordinator exited: %v", proc.waitErr)
		}
		n := 0
		for _, a := range agents {
			st, err := a.c.Status()
			if err != nil || st.Installed == nil || st.Installed.Version != crashFinal || st.Outbox != 0 {
				return false, fmt.Sprintf("%s: %+v %v", a.site, st, err)
			}
			n += verdicts(st)
		}
		return n >= wantVerdicts, fmt.Sprintf("%d verdicts, want %d", n, wantVerdicts)
	})
	elapsed := time.Since(began)
	proc.stop(t)
	for _, a := range agents {
		a.halt()
	}

	// Sites: exactly one update made, sent and accepted per round; versions
	// installed in increasing order.
	lost := 0
	for _, a := range agents {
		st, err := a.c.Status()
		if err != nil {
			t.Fatal(err)
		}
		k := st.Counters
		if st.Seq != crashRounds || k.Trained != crashRounds || k.Published != crashRounds || st.Outbox != 0 || k.DroppedFull != 0 {
			t.Errorf("%s: seq %d, trained %d, published %d, outbox %d, dropped %d; want %d updates made and sent",
				a.site, st.Seq, k.Trained, k.Published, st.Outbox, k.DroppedFull, crashRounds)
		}
		if len(k.Rejected) > 0 || k.Duplicate > 0 || k.Accepted > crashRounds {
			t.Errorf("%s: verdicts %+v, want %d accepted and nothing else", a.site, k, crashRounds)
		}
		lost += crashRounds - k.Accepted
		vs := a.installed()
		for i := 1; i < len(vs); i++ {
			if vs[i] <= vs[i-1] {
				t.Errorf("%s installed versions %v: not increasing", a.site, vs)
				break
			}
		}
		if len(vs) == 0 || vs[len(vs)-1] != crashFinal {
			t.Errorf("%s installed versions %v, want the last to be %d", a.site, vs, crashFinal)
		}
	}
	if lost > crashSites*crashRounds-wantVerdicts {
		t.Errorf("%d accepted verdicts never reached their sites", lost)
	}
	bus.check(t)

	// The coordinator's store after a clean stop: consistent, each round
	// took each site's update once, one model per round.
	checkBolt(t, dbPath, "after the restarted coordinator stopped")
	audit := auditCounts(t, dbPath)
	for r := uint64(1); r <= crashRounds; r++ {
		if n := audit[fmt.Sprintf("round.aggregated round %d", r)]; n != 1 {
			t.Errorf("round %d aggregated %d times", r, n)
		}
		for _, s := range f.sites {
			if n := audit[fmt.Sprintf("update.accepted round %d %s", r, s)]; n != 1 {
				t.Errorf("round %d: %s's update accepted %d times", r, s, n)
			}
		}
	}
	checkStoredOnce(t, audit, crashFinal)
	if n := audit["update.rejected"]; n != 0 {
		t.Errorf("%d updates rejected", n)
	}

	c, err := coordinator.New(f.coordinatorConfig(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkRecords(t, c, crashRounds, crashSites)
	rej, err := c.Rejects()
	if err != nil {
		t.Fatal(err)
	}
	for reason, n := range rej {
		if n > 0 {
			t.Errorf("coordinator counted %d rejections for %s", n, reason)
		}
	}
	models, err := c.Models(0)
	if err != nil {
		t.Fatal(err)
	}
	res := crashResult{elapsed: elapsed, models: map[uint64]coordinator.Model{}, weights: map[uint64][]float32{}}
	for _, m := range models {
		res.models[m.Version] = m
		if m.Status != coordinator.ModelPublished {
			t.Errorf("model version %d is %s, want published", m.Version, m.Status)
		}
	}
	if len(models) != crashFinal {
		t.Errorf("%d model versions, want %d", len(models), crashFinal)
	}
	for v := uint64(1); v <= crashFinal; v++ {
		m, err := c.FloatModel(v)
		if err != nil {
			t.Fatalf("model version %d: %v", v, err)
		}
		res.weights[v] = m.Net.Flat()
	}
	return res
}

// coordProcArgs writes the files an edge-coordinator process of fleet f
// needs into dir (its key, the sites' public keys, the start model) and
// returns its arguments for synchronous rounds that wait for every site
// (--data is the caller's).
func coordProcArgs(t *testing.T, f *fleet, dir, url string, rounds int) []string {
	t.Helper()
	args := rootProcArgs(t, dir, url, rounds, f.coordKey, f.sites, f.keys, fltest.SmallModel(t, 1), nil, nil)
	return append(args, "--local-iterations", "1", "--local-episodes", "1")
}

// rootProcArgs writes into dir the files of an edge-coordinator root
// with key coordKey, sites (public keys from keys), the start model and,
// when regions is set, the regions' public keys (from rkeys) and site
// lists; it returns the arguments for synchronous rounds that wait for
// every site.
func rootProcArgs(t *testing.T, dir, url string, rounds int, coordKey *quant.Signer, sites []string, keys map[string]*quant.Signer,
	start *nn.Model, regions *federated.Regions, rkeys map[string]*quant.Signer) []string {
	t.Helper()
	keyPath, _, err := quant.WriteKeyPair(dir, "coordinator", coordKey)
	if err != nil {
		t.Fatal(err)
	}
	sitesDir, regionsDir, scratch := filepath.Join(dir, "sites"), filepath.Join(dir, "regions"), filepath.Join(dir, "site-keys")
	for _, d := range []string{sitesDir, regionsDir, scratch} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	pub := func(name string, k *quant.Signer, to string) {
		_, p, err := quant.WriteKeyPair(scratch, name, k)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p, filepath.Join(to, name+".pub")); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sites {
		pub(s, keys[s], sitesDir)
	}
	modelPath := filepath.Join(dir, "start.esm")
	if err := nn.WriteFile(modelPath, start, "model", nil, nil); err != nil {
		t.Fatal(err)
	}
	args := []string{"--server", url, "--key", keyPath, "--sites", sitesDir, "--model", modelPath,
		"--calibrate", "builtin:factory-vision", "--auto-rounds", "--rounds", strconv.Itoa(rounds),
		"--round-duration", "1h", "--min-updates", strconv.Itoa(len(sites)), "--seed", "7", "--log-level", "debug"}
	if regions == nil {
		return args
	}
	for _, g := range regions.Names() {
		pub(g, rkeys[g], regionsDir)
		list := strings.Join(regions.Sites(g), "\n") + "\n"
		if err := os.WriteFile(filepath.Join(regionsDir, g+".sites"), []byte(list), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return append(args, "--regions", regionsDir)
}

// checkStoredOnce: the audit log (auditCounts) stored each model version
// 1 to final once.
func checkStoredOnce(t *testing.T, audit map[string]int, final int) {
	t.Helper()
	for v := 1; v <= final; v++ {
		if n := audit[fmt.Sprintf("model.stored version %d", v)]; n != 1 {
			t.Errorf("model version %d stored %d times", v, n)
		}
	}
}

// checkRecords: the coordinator's store holds rounds rounds, each
// published with one update of each of its sites and the next version,
// and every site's record at rounds accepted, none refused.
func checkRecords(t *testing.T, c *coordinator.Coordinator, rounds, sites int) {
	t.Helper()
	rs, err := c.Rounds(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != rounds {
		t.Errorf("%d rounds, want %d", len(rs), rounds)
	}
	for _, r := range rs {
		if r.State != coordinator.StatePublished || r.Accepted != sites || r.Result != r.Round+1 || r.Stats["updates"] != float64(sites) {
			t.Errorf("round %d: %s, %d accepted, result version %d, stats %v; want published, %d accepted, version %d",
				r.Round, r.State, r.Accepted, r.Result, r.Stats, sites, r.Round+1)
		}
	}
	ss, err := c.Sites()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Accepted != rounds || s.HWM != uint64(rounds) || len(s.Rejected) > 0 {
			t.Errorf("coordinator's record of %s: %d accepted, hwm %d, rejected %v; want %d, %d, none", s.Site.Site, s.Accepted, s.HWM, s.Rejected, rounds, rounds)
		}
	}
}

// serverAtLeast reports whether nats-server version v (major.minor.patch)
// is at least major.minor.
func serverAtLeast(v string, major, minor int) bool {
	var a, b, c int
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &a, &b, &c); err != nil {
		return true
	}
	return a > major || (a == major && b >= minor)
}

package fl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// HA failover sizes: 50 sites (the fleet) train haRounds
// synchronous rounds that each wait for every site, so the registry goes
// from version 1 (bootstrap) to 1+haRounds.
const (
	haSites  = 50
	haRounds = 4
	// haTakeover is the longest a standby may take to hold the lease
	// after the active's death (the bound); serving the admin API
	// comes after its recovery, which may aggregate a complete round.
	haTakeover = 10 * time.Second
)

// adminCall asks the coordinator's admin endpoint and decodes its answer.
func adminCall(nc *nats.Conn, endpoint string, out any) error {
	m, err := nc.Request(federated.AdminSubjectPrefix+"."+endpoint, []byte("{}"), 500*time.Millisecond)
	if err != nil {
		return err
	}
	if e := m.Header.Get("Nats-Service-Error"); e != "" {
		return errors.New(e)
	}
	return json.Unmarshal(m.Data, out)
}

// TestHAFailover: two edge-coordinator processes run with --ha on a
// 3-server JetStream cluster (everything R3), 50 sites train four rounds,
// and during round 2 the active replica is killed with SIGKILL (with one
// of the three NATS servers shut down first: the one leading the lease
// bucket), or stopped with SIGSTOP and resumed once the standby has taken
// over (a paused active must step down and change nothing). Each time the
// standby takes the lease within 10 s and then serves as the active; every round takes each
// site's update exactly once (no update lost: 50 accepted a round and
// every site's high-water mark at 4; none applied twice: each (round,
// site) accepted once in the audit log, one model stored per version);
// the model versions on the bus and at every site only move forward.
func TestHAFailover(t *testing.T) {
	bin := buildEdgeCoordinator(t)
	for _, tc := range []struct {
		name       string
		loseServer bool
		pause      bool
	}{
		{"kill", false, false},
		{"kill-and-server-loss", true, false},
		{"pause", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) { runHAFailover(t, bin, tc.loseServer, tc.pause) })
	}
}

func runHAFailover(t *testing.T, bin string, loseServer, pause bool) {
	cl := fltest.StartCluster(t, 3)
	url := cl.URLs()
	f := newFleet(t, url, haSites)
	dir := t.TempDir()
	base := append(coordProcArgs(t, f, dir, url, haRounds), "--replicas", "3", "--ha", "--lease-ttl", "4s", "--checkpoint-every", "2s")
	logPath := filepath.Join(dir, "edge-coordinator.log")
	logOnFailure(t, logPath)
	bus := watchStateBucket(t, url)
	nc := fltest.Connect(t, url, "ha-probe")
	procs := map[string]*coordProc{}
	start := func(id string) {
		procs[id] = startCoordProc(t, bin, append(base, "--data", filepath.Join(dir, id), "--replica-id", id), "", logPath)
	}
	start("a")
	waitActive(t, nc, "a", 30*time.Second)
	start("b")

	var agents []*crashAgent
	for _, s := range f.sites {
		agents = append(agents, f.startCrashAgent(s, filepath.Join(dir, "agents", s)))
	}
	fltest.Eventually(t, 120*time.Second, "round 2 collecting", func() (bool, string) {
		var r coordinator.Round
		err := adminCall(nc, coordinator.EndpointRoundStatus, &r)
		return err == nil && r.Round >= 2 && r.State == coordinator.StateCollecting, fmt.Sprintf("%+v %v", r, err)
	})
	before := waitActive(t, nc, "a", 10*time.Second)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if loseServer {
		shutdownStreamLeader(t, cl, js, "KV_"+coordinator.LeaseBucket)
	}
	a := procs["a"]
	sig := syscall.SIGKILL
	if pause {
		sig = syscall.SIGSTOP
	}
	killed := time.Now()
	if err := a.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica a (epoch %d) sent %v in round 2", before.Epoch, sig)
	// the takeover: b holds the lease; then it restores the checkpoint,
	// recovers (which may aggregate a complete round) and serves
	took := waitLeaseHolder(t, js, "b", killed, 3*haTakeover)
	after := waitActive(t, nc, "b", 6*haTakeover)
	serving := time.Since(killed)
	if after.Checkpoint == nil {
		t.Fatalf("replica b active without a checkpoint: %+v", after)
	}
	t.Logf("replica b took the lease %v after the signal and served as the active (epoch %d, checkpoint %s of %d bytes, floor %d) after %v",
		took.Round(time.Millisecond), after.Epoch, after.Checkpoint.Object, after.Checkpoint.Bytes, after.Checkpoint.Floor, serving.Round(time.Millisecond))
	if took > haTakeover {
		t.Errorf("takeover took %v, want at most %v", took, haTakeover)
	}
	if after.Epoch <= before.Epoch {
		t.Errorf("epoch %d after the takeover, %d before: want it to grow", after.Epoch, before.Epoch)
	}
	if pause {
		if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		a.waitExit(t, 30*time.Second, "a deposed active resumed")
		if a.waitErr == nil {
			t.Errorf("the deposed active exited cleanly, want an error (deposed)")
		}
	} else {
		a.waitExit(t, 10*time.Second, "after SIGKILL")
	}

	final := uint64(1 + haRounds)
	fltest.Eventually(t, 120*time.Second, fmt.Sprintf("every site on version %d", final), func() (bool, string) {
		if procs["b"].exited() {
			t.Fatalf("replica b exited: %v", procs["b"].waitErr)
		}
		for _, a := range agents {
			st, err := a.c.Status()
			if err != nil || st.Installed == nil || st.Installed.Version != final || st.Outbox != 0 {
				return false, fmt.Sprintf("%s: %+v %v", a.site, st, err)
			}
		}
		return true, ""
	})
	procs["b"].stop(t)
	for _, a := range agents {
		a.halt()
	}

	for _, a := range agents {
		st, err := a.c.Status()
		if err != nil {
			t.Fatal(err)
		}
		if k := st.Counters; st.Seq != haRounds || k.Trained != haRounds || st.Outbox != 0 || k.DroppedFull != 0 {
			t.Errorf("%s: seq %d, trained %d, outbox %d, dropped %d; want %d updates made and sent", a.site, st.Seq, k.Trained, st.Outbox, k.DroppedFull, haRounds)
		}
		vs := a.installed()
		for i := 1; i < len(vs); i++ {
			if vs[i] <= vs[i-1] {
				t.Errorf("%s installed versions %v: not increasing", a.site, vs)
				break
			}
		}
	}
	bus.checkUpTo(t, final, haRounds)

	// The surviving active's store: each round took each site's update
	// once, one model per round.
	dataDir := filepath.Join(dir, "b")
	checkBolt(t, filepath.Join(dataDir, "coordinator.db"), "after the new active stopped")
	audit := auditCounts(t, filepath.Join(dataDir, "coordinator.db"))
	lost, twice := 0, 0
	for r := uint64(1); r <= haRounds; r++ {
		if n := audit[fmt.Sprintf("round.aggregated round %d", r)]; n != 1 {
			t.Errorf("round %d aggregated %d times", r, n)
		}
		for _, s := range f.sites {
			switch n := audit[fmt.Sprintf("update.accepted round %d %s", r, s)]; {
			case n == 0:
				lost++
			case n > 1:
				twice += n - 1
			}
		}
	}
	checkStoredOnce(t, audit, int(final))
	t.Logf("updates lost %d, applied twice %d (of %d)", lost, twice, haSites*haRounds)
	if lost != 0 || twice != 0 {
		t.Errorf("updates lost %d, applied twice %d; want 0 and 0", lost, twice)
	}
	c, err := coordinator.New(f.coordinatorConfig(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkRecords(t, c, haRounds, haSites)
}

// waitActive waits until replica id answers ha.status as the active and
// returns its status.
func waitActive(t *testing.T, nc *nats.Conn, id string, within time.Duration) coordinator.HAStatus {
	t.Helper()
	var st coordinator.HAStatus
	fltest.Eventually(t, within, "replica "+id+" active", func() (bool, string) {
		st = coordinator.HAStatus{}
		err := adminCall(nc, coordinator.EndpointHAStatus, &st)
		return err == nil && st.Replica == id, fmt.Sprintf("%+v %v", st, err)
	})
	return st
}

// waitLeaseHolder waits until replica id holds the lease and returns how
// long after since it was seen holding it.
func waitLeaseHolder(t *testing.T, js jetstream.JetStream, id string, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	var took time.Duration
	fltest.Eventually(t, within, "replica "+id+" holding the lease", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		kv, err := js.KeyValue(ctx, coordinator.LeaseBucket)
		if err != nil {
			return false, err.Error()
		}
		e, err := kv.Get(ctx, "active")
		if err != nil {
			return false, err.Error()
		}
		var l coordinator.Lease
		took = time.Since(since)
		return json.Unmarshal(e.Value(), &l) == nil && l.Replica == id, string(e.Value())
	})
	return took
}

// shutdownStreamLeader shuts down the NATS server of cl leading stream
// and returns its name.
func shutdownStreamLeader(t *testing.T, cl *fltest.Cluster, js jetstream.JetStream, stream string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	leader, err := fltest.StreamLeader(ctx, js, stream)
	cancel()
	if err != nil || leader == "" {
		t.Fatalf("%s leader %q: %v", stream, leader, err)
	}
	for _, s := range cl.Servers {
		if s.Name() == leader {
			t.Logf("shutting down %s, the leader of %s", leader, stream)
			s.Shutdown()
		}
	}
	return leader
}

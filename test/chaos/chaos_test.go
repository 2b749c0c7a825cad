package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/test/chaos/internal/history"
)

// summary is the run's JSON report (docs/chaos.md explains each field).
type summary struct {
	Seed     uint64 `json:"seed"`
	Agents   int    `json:"agents"`
	Mode     string `json:"mode"`
	FaultFor string `json:"fault_duration"`
	Elapsed  string `json:"elapsed"`
	Drain    string `json:"drain"`

	Faults          map[string]int `json:"faults"`
	FaultsSkipped   int            `json:"faults_skipped"`
	FailpointsFired int            `json:"failpoints_fired"`
	// CoordinatorNoNATS counts coordinator starts that exited at once
	// because NATS was down (edge-coordinator does not retry its first
	// connection; restarted after a pause).
	CoordinatorNoNATS int            `json:"coordinator_exits_no_nats"`
	Restarts          map[string]int `json:"restarts"`
	NATSDown          string         `json:"nats_downtime"`
	CoordinatorDown   string         `json:"coordinator_downtime"`

	RoundsCompleted int `json:"rounds_completed"`
	RoundsFailed    int `json:"rounds_failed"`
	ModelVersions   int `json:"model_versions"`

	Check *history.Report `json:"updates"`

	BadInput        badInputCounts `json:"bad_input_sent"`
	BadInputRefused map[string]int `json:"bad_input_refused"`

	// DiskFullErrors counts agent log lines reporting ENOSPC; Replays
	// the resends the coordinator refused as replays (no audit entry:
	// harmless for a real resend, a loss for an update never judged).
	DiskFullErrors int `json:"disk_full_errors"`
	Replays        int `json:"replays"`

	BoltChecks   int      `json:"bolt_checks"`
	BoltFailures []string `json:"bolt_failures,omitempty"`
	Crashes      []string `json:"crashes,omitempty"`
	DiskFullOff  string   `json:"disk_full_disabled,omitempty"`
	RunDir       string   `json:"run_dir"`
}

// refusalsAllowed are the refusals a real update may get under faults:
// a sync round that closed while the update was on its way refuses it
// (stale_round once the next round opened, round_closed while the
// round is aggregating; an async round too while it aggregates). Any
// other refusal of a real update means something broke (a forged
// update burnt a sequence: replay; a round got lost: unknown_round).
var refusalsAllowed = map[string]map[string]bool{
	"async": {federated.ReasonRoundClosed: true},
	"sync":  {federated.ReasonRoundClosed: true, federated.ReasonStaleRound: true},
}

// modelRefusalsAllowed are the reasons an agent may refuse a model
// under faults: its fetch failed (link down, NATS restarting). Any other
// (rollback, conflict, signature, stale under a skew well inside the
// maximum age, ...) means a model that must not exist was offered.
var modelRefusalsAllowed = map[string]bool{"fetch": true}

// TestChaos runs the fleet under mixed faults and checks the histories
// (see the package documentation and docs/chaos.md).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: skipped under -short (starts NATS, the coordinator and 8 agents for over a minute)")
	}
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos run: %s (replay with %s=%d)", cfg, envSeed, cfg.seed)
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(cfg.out, fmt.Sprintf("run-%d-", cfg.seed))
	if err != nil {
		t.Fatal(err)
	}
	// registered first, so it runs last (after unmounting the disks)
	t.Cleanup(func() {
		if t.Failed() || cfg.keep {
			_ = os.RemoveAll(filepath.Join(dir, "bin")) // the programs: rebuilt by any run
			t.Logf("run directory kept: %s (logs, histories, stores)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	began := time.Now()
	bins := buildBinaries(t, filepath.Join(dir, "bin"))
	c := newCluster(t, cfg, dir, bins)
	t.Cleanup(c.killAll)

	c.startNATS()
	c.connect()
	c.startCoordinator("")
	if err := c.waitCoordinator(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, tail(c.coordLog, 3000))
	}
	c.startFleet()
	if err := c.waitInstalled(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("fleet up in %v: %d agents installed the first model", time.Since(began).Round(time.Millisecond), cfg.agents)

	s := newScheduler(c)
	s.run(time.Now().Add(cfg.duration))
	s.healAll()
	faultEnd := time.Now()
	if err := c.waitCoordinator(60 * time.Second); err != nil {
		t.Fatalf("after the faults: %v\n%s", err, tail(c.coordLog, 3000))
	}
	drainErr := c.drain(2*time.Minute + time.Duration(cfg.agents)*time.Second)
	drain := time.Since(faultEnd)
	s.runDue(true) // nothing should be left; a late restart would be
	c.stopAll()
	if err := os.WriteFile(filepath.Join(dir, "faults.log"), []byte(strings.Join(s.log, "\n")+"\n"), 0o644); err != nil {
		t.Error(err)
	}

	// Stores after the clean stop (the agents' copied off their tmpfs,
	// which goes with the run), logs, histories.
	c.checkBolt(c.coordDB, "coordinator.db after the run")
	for _, a := range c.agents {
		db := filepath.Join(a.dataDir, "agent.db")
		c.checkBolt(db, a.site+" agent.db after the run")
		if b, err := os.ReadFile(db); err == nil {
			_ = os.WriteFile(filepath.Join(filepath.Dir(a.history), "agent.db"), b, 0o644)
		}
	}
	for _, p := range append([]string{c.coordLog, filepath.Join(dir, "nats.log")}, agentLogs(c)...) {
		for _, m := range scanLog(p) {
			c.crashes = append(c.crashes, fmt.Sprintf("%s: %s", filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), m))
		}
	}
	view, err := history.ReadCoordinator(c.coordDB)
	if err != nil {
		t.Fatal(err)
	}
	var agents []history.Agent
	for _, a := range c.agents {
		recs, torn, err := history.ReadFile(a.history)
		if err != nil {
			t.Fatalf("%s: %v", a.site, err)
		}
		if torn {
			t.Errorf("%s: history ends with a torn record", a.site)
		}
		agents = append(agents, history.Agent{Site: a.site, Records: recs})
	}
	rep := history.Check(agents, view.Verdicts)

	sum := summary{Seed: cfg.seed, Agents: cfg.agents, Mode: cfg.mode, FaultFor: cfg.duration.String(),
		Elapsed: time.Since(began).Round(time.Millisecond).String(), Drain: drain.Round(time.Millisecond).String(),
		Faults: c.faults, FaultsSkipped: c.skipped, FailpointsFired: c.fired, CoordinatorNoNATS: c.startFailures, Restarts: c.restarts,
		NATSDown: c.natsOutages.Round(time.Millisecond).String(), CoordinatorDown: c.coordOut.Round(time.Millisecond).String(),
		ModelVersions: len(view.Models), Check: rep, BadInput: c.badInput, BadInputRefused: view.Unattributed,
		BoltChecks: c.boltChecks, BoltFailures: c.boltFailed, Crashes: c.crashes, RunDir: dir}
	if !c.tmpfs {
		sum.DiskFullOff = c.tmpfsWhy
	}
	for _, a := range c.agents {
		sum.DiskFullErrors += countLines(a.logPath, "no space left on device")
	}
	for _, st := range view.Sites {
		sum.Replays += st.Rejected[federated.ReasonReplay]
	}
	for _, r := range view.Rounds {
		switch r.State {
		case coordinator.StatePublished:
			sum.RoundsCompleted++
		case coordinator.StateFailed:
			sum.RoundsFailed++
		}
	}
	raw, _ := json.MarshalIndent(sum, "", "  ")
	sumPath := filepath.Join(cfg.out, fmt.Sprintf("summary-%d.json", cfg.seed))
	if err := os.WriteFile(sumPath, raw, 0o644); err != nil {
		t.Error(err)
	}
	logSummary(t, sum, sumPath)

	// The invariants.
	if drainErr != nil {
		t.Errorf("after healing, the outboxes did not drain: %v", drainErr)
	}
	if !rep.OK() {
		t.Errorf("history check: %d violations:\n  %s", rep.ViolationCount, strings.Join(rep.Violations, "\n  "))
		// what the coordinator's site records say: a lost update is
		// usually one refused as a replay (counted there, not audited)
		for _, st := range view.Sites {
			if len(st.Rejected) > 0 || st.HWM != uint64(st.Accepted) {
				t.Logf("  coordinator's record of %s: high-water mark %d, accepted %d, refused %v", st.Site, st.HWM, st.Accepted, st.Rejected)
			}
		}
	}
	if len(c.crashes) > 0 {
		t.Errorf("%d process crashes:\n%s", len(c.crashes), strings.Join(c.crashes, "\n---\n"))
	}
	if len(c.boltFailed) > 0 {
		t.Errorf("bbolt check failed %d times", len(c.boltFailed))
	}
	for reason, n := range rep.Refused {
		if !refusalsAllowed[cfg.mode][reason] {
			t.Errorf("%d real updates refused as %s", n, reason)
		}
	}
	for reason, n := range rep.RefusedModels {
		if !modelRefusalsAllowed[reason] {
			t.Errorf("agents refused %d models as %s", n, reason)
		}
	}
	for reason, sent := range c.badInput.Sent {
		stored, got := c.badInput.Stored[reason], view.Unattributed[reason]
		if got < stored || got > sent {
			t.Errorf("bad input: %d updates sent that the coordinator owes %s, %d stored by the stream; it refused %d so", sent, reason, stored, got)
		}
	}
	for reason, n := range view.Unattributed {
		if c.badInput.Sent[reason] == 0 {
			t.Errorf("the coordinator refused %d unattributed updates as %s; none were sent", n, reason)
		}
	}
	if c.badInput.AdminRequests > 0 && c.badInput.AdminAnswered == 0 {
		t.Errorf("none of %d junk admin requests was answered", c.badInput.AdminRequests)
	}
	for kind := range cfg.faults {
		if c.faults[kind] == 0 {
			t.Errorf("fault %s was never injected: the run is too short for its %d agents", kind, cfg.agents)
		}
	}
	if rep.Applied == 0 || sum.RoundsCompleted == 0 {
		t.Errorf("no progress under faults: %d updates applied, %d rounds completed", rep.Applied, sum.RoundsCompleted)
	}
}

// countLines counts the lines of a file containing s.
func countLines(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func agentLogs(c *cluster) []string {
	var out []string
	for _, a := range c.agents {
		out = append(out, a.logPath)
	}
	return out
}

// logSummary prints the figures.
func logSummary(t *testing.T, s summary, path string) {
	r := s.Check
	var kinds []string
	for k, n := range s.Faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	t.Logf("chaos summary (seed %d, %d agents, %s rounds, %s of faults, %s in all, drain %s):", s.Seed, s.Agents, s.Mode, s.FaultFor, s.Elapsed, s.Drain)
	t.Logf("  faults: %s (skipped %d; failpoints fired %d); restarts %v; NATS down %s, coordinator down %s; coordinator exits for want of NATS at start %d",
		strings.Join(kinds, ", "), s.FaultsSkipped, s.FailpointsFired, s.Restarts, s.NATSDown, s.CoordinatorDown, s.CoordinatorNoNATS)
	t.Logf("  rounds completed %d, failed %d; model versions %d", s.RoundsCompleted, s.RoundsFailed, s.ModelVersions)
	t.Logf("  updates: written %d, applied %d, refused %v, pending %d, lost %d, applied twice %d, multiple verdicts %d, phantom %d, dropped for room %d",
		r.Written, r.Applied, r.Refused, r.Pending, r.Lost, r.AppliedTwice, r.MultipleVerdicts, r.Phantom, r.DroppedFull)
	t.Logf("  models: %d installs, version regressions %d, refused %v; agent restarts %d, store regressions %d",
		r.Installs, r.VersionRegressions, r.RefusedModels, r.Restarts, r.SeqRegressions)
	t.Logf("  latency outbox write -> applied: p50 %.0f ms, p95 %.0f ms, max %.0f ms (%d updates)", r.Latency.P50, r.Latency.P95, r.Latency.Max, r.Latency.N)
	t.Logf("  disk-full errors logged by agents %d; resends refused as replays %d", s.DiskFullErrors, s.Replays)
	t.Logf("  bad input sent %+v, refused %v; bbolt checks %d (failed %d); crashes %d", s.BadInput, s.BadInputRefused, s.BoltChecks, len(s.BoltFailures), len(s.Crashes))
	t.Logf("  summary: %s", path)
}

// killAll kills whatever still runs (a failed test's leftovers).
func (c *cluster) killAll() {
	var ps []*proc
	if c.nats != nil {
		ps = append(ps, c.nats)
	}
	if c.coord != nil {
		ps = append(ps, c.coord)
	}
	for _, a := range c.agents {
		if a.proc != nil {
			ps = append(ps, a.proc)
		}
	}
	for _, p := range ps {
		if !p.exited() {
			p.kill()
		}
	}
}

// waitInstalled waits until every agent's history shows a model
// installed.
func (c *cluster) waitInstalled(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var missing []string
		for _, a := range c.agents {
			recs, _, err := history.ReadFile(a.history)
			if err != nil || !slices.ContainsFunc(recs, func(r history.Record) bool { return r.Ev == history.EvInstalled }) {
				missing = append(missing, a.site)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("within %v, %d agents installed no model: %v\n%s", within, len(missing), missing, tail(c.coordLog, 2000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// drain stops new updates (the quiesce file) and waits until every
// agent reports an empty outbox and the coordinator's consumer has
// nothing pending or unacked, twice in a row.
func (c *cluster) drain(within time.Duration) error {
	start := time.Now()
	if err := os.WriteFile(c.quiesceFile(), nil, 0o644); err != nil {
		return err
	}
	var mu sync.Mutex
	type seen struct {
		r  federated.SiteReport
		at time.Time
	}
	latest := map[string]seen{}
	sub, err := c.nc.Subscribe(federated.StatusSubjectPrefix+"*", func(m *nats.Msg) {
		r, err := federated.DecodeSiteReport(m.Data)
		if err != nil {
			return
		}
		mu.Lock()
		latest[r.Site] = seen{*r, time.Now()}
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	js, err := jetstream.New(c.nc)
	if err != nil {
		return err
	}
	// reports are sent every second: one received 2 s after the
	// quiesce file appeared follows any training under way then
	settled := start.Add(2 * time.Second)
	var why string
	streak := 0
	for time.Since(start) < within {
		time.Sleep(500 * time.Millisecond)
		var waiting []string
		mu.Lock()
		for _, a := range c.agents {
			s, ok := latest[a.site]
			if !ok || s.at.Before(settled) || s.r.Outbox > 0 {
				waiting = append(waiting, fmt.Sprintf("%s (outbox %d)", a.site, s.r.Outbox))
			}
		}
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cons, err := js.Consumer(ctx, federated.UpdateStream, "coordinator")
		var info *jetstream.ConsumerInfo
		if err == nil {
			info, err = cons.Info(ctx)
		}
		cancel()
		switch {
		case err != nil:
			why = fmt.Sprintf("consumer: %v", err)
		case len(waiting) > 0:
			why = fmt.Sprintf("%d agents not drained: %s", len(waiting), strings.Join(waiting[:min(5, len(waiting))], ", "))
		case info.NumPending > 0 || info.NumAckPending > 0:
			why = fmt.Sprintf("coordinator has %d updates to fetch and %d unacked", info.NumPending, info.NumAckPending)
		default:
			if streak++; streak >= 2 {
				return nil
			}
			continue
		}
		streak = 0
	}
	return fmt.Errorf("not drained within %v: %s", within, why)
}

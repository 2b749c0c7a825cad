package chaosagent

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/test/chaos/internal/history"
)

func TestFlagErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no site", []string{"--site-key", "k", "--model-keys", "m", "--data", "d", "--history", "h"}, "--site is required"},
		{"no history", []string{"--site", "s", "--site-key", "k", "--model-keys", "m", "--data", "d"}, "--history is required"},
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"--site", "s", "--site-key", "k", "--model-keys", "m", "--data", "d", "--history", "h", "extra"}, `unexpected arguments ["extra"]`},
		{"missing key file", []string{"--site", "s", "--site-key", "/nonexistent/k", "--model-keys", "m", "--data", "d", "--history", "h"}, "--site-key: "},
		{"bad skew", []string{"--clock-skew", "soon"}, `invalid value "soon" for flag -clock-skew`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := Main(context.Background(), tc.args, &stderr); code != 1 {
				t.Fatalf("exit code %d, want 1 (stderr %q)", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q, want it to name %q", stderr.String(), tc.want)
			}
		})
	}
}

// TestAgentRecordsHistory runs the agent against an embedded NATS server
// and an in-process coordinator (async rounds, one update per
// aggregation), stops it, starts it again on the same store, and checks
// its history: a start and a stop record each time, every committed
// update staged before its outbox write and done after the stream took
// it, each accepted once by the coordinator, model versions increasing.
func TestAgentRecordsHistory(t *testing.T) {
	srv := fltest.StartNATS(t)

	dir := t.TempDir()
	rng := rand.NewChaCha8([32]byte{7})
	coordKey, _, err := quant.GenerateKey(rng)
	if err != nil {
		t.Fatal(err)
	}
	siteKey, _, err := quant.GenerateKey(rng)
	if err != nil {
		t.Fatal(err)
	}
	_, coordPub, err := quant.WriteKeyPair(dir, "coordinator", coordKey)
	if err != nil {
		t.Fatal(err)
	}
	sitePriv, _, err := quant.WriteKeyPair(dir, "store-1", siteKey)
	if err != nil {
		t.Fatal(err)
	}
	reg := &federated.Registry{}
	if err := reg.Add("store-1", siteKey.Public()); err != nil {
		t.Fatal(err)
	}
	cfg := fltest.CoordinatorConfig(filepath.Join(dir, "coord"), reg, coordKey)
	cfg.Mode, cfg.Buffer, cfg.AutoRounds = federated.Async, 1, true
	coord, stopCoordinator := fltest.RunCoordinator(t, srv.ClientURL(), cfg, fltest.SmallModel(t, 3))

	hist := filepath.Join(dir, "history.jsonl")
	args := []string{"--site", "store-1", "--site-key", sitePriv, "--model-keys", coordPub, "--server", srv.ClientURL(),
		"--data", filepath.Join(dir, "agent"), "--history", hist, "--async-interval", "50ms", "--train-time", "1ms",
		"--clock-skew", "-3m", "--quiesce-file", filepath.Join(dir, "quiesce")}
	run := func(until func([]history.Record) bool) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		var logs bytes.Buffer
		done := make(chan int, 1)
		go func() { done <- Main(ctx, args, &logs) }()
		deadline := time.Now().Add(30 * time.Second)
		for {
			recs, _, _ := history.ReadFile(hist)
			if until(recs) {
				break
			}
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("history never got there: %d records\n%s", len(recs), logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("exit code %d\n%s", code, logs.String())
		}
	}
	count := func(recs []history.Record, ev string) int {
		n := 0
		for _, r := range recs {
			if r.Ev == ev {
				n++
			}
		}
		return n
	}
	// first run: until three updates went out and two models came in
	run(func(recs []history.Record) bool {
		return count(recs, history.EvDone) >= 3 && count(recs, history.EvInstalled) >= 2
	})
	// second run on the same store: one more update out
	first, _, _ := history.ReadFile(hist)
	run(func(recs []history.Record) bool { return count(recs, history.EvDone) > count(first, history.EvDone) })
	// quiesced: no new update (the trainer refuses), the stop still comes
	if err := os.WriteFile(filepath.Join(dir, "quiesce"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _, _ := history.ReadFile(hist)
	run(func(recs []history.Record) bool { return count(recs, history.EvStart) > count(before, history.EvStart) })

	recs, torn, err := history.ReadFile(hist)
	if err != nil || torn {
		t.Fatalf("history: %v (torn %v)", err, torn)
	}
	if s, e := count(recs, history.EvStart), count(recs, history.EvStop); s != 3 || e != 3 {
		t.Fatalf("%d starts and %d stops, want 3 of each", s, e)
	}
	if recs[0].SkewNS != int64(-3*time.Minute) {
		t.Errorf("start record skew %v, want -3m", time.Duration(recs[0].SkewNS))
	}
	// the quiesced run made no update: its stop has the seq of its start
	last := recs[len(recs)-1]
	var lastStart history.Record
	for _, r := range recs {
		if r.Ev == history.EvStart {
			lastStart = r
		}
	}
	if last.Ev != history.EvStop || last.State.Seq != lastStart.State.Seq {
		t.Errorf("quiesced run: started at seq %d, stopped at %+v", lastStart.State.Seq, last)
	}

	// The updates the agent sent (written, no longer in its outbox) reach
	// the coordinator through its durable stream and are judged in group
	// commits: wait until it has judged the last one, then read its
	// verdicts the way the chaos test reads them (after it stopped).
	var sent uint64
	pending := map[uint64]bool{}
	for _, s := range last.State.Outbox {
		pending[s] = true
	}
	for seq := last.State.Seq; seq > 0; seq-- {
		if !pending[seq] {
			sent = seq
			break
		}
	}
	judged := func() uint64 {
		sites, err := coord.Sites()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sites {
			if s.Site.Site == "store-1" {
				return s.HWM
			}
		}
		return 0
	}
	for deadline := time.Now().Add(30 * time.Second); judged() < sent; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator judged updates up to seq %d in 30 s; the agent sent up to %d", judged(), sent)
		}
	}
	stopCoordinator()
	view, err := history.ReadCoordinator(filepath.Join(dir, "coord", "coordinator.db"))
	if err != nil {
		t.Fatal(err)
	}
	rep := history.Check([]history.Agent{{Site: "store-1", Records: recs}}, view.Verdicts)
	if !rep.OK() {
		t.Fatalf("violations: %q", rep.Violations)
	}
	// every committed update was applied, is still pending (the agent
	// stopped with some in its outbox), or arrived after its round had
	// closed (round_closed: the coordinator's verdict for an update late
	// for its round, e.g. one sent while the agent restarted; decided,
	// not lost). No other refusal.
	late := rep.Refused["round_closed"]
	if len(rep.Refused) > 0 && late != sumRefused(rep.Refused) {
		t.Fatalf("report %+v: refusals other than round_closed", rep)
	}
	if rep.Written < 4 || rep.Applied+rep.Pending+late != rep.Written || rep.Applied < rep.Written/2 || rep.Installs < 2 || rep.Restarts != 2 {
		t.Fatalf("report %+v: want >= 4 written, each applied, pending or late for its round (most applied), >= 2 installs, 2 restarts", rep)
	}
	t.Logf("%d updates written, %d applied, %d pending; %d installs; %d verdicts in the audit log", rep.Written, rep.Applied, rep.Pending, rep.Installs, len(view.Verdicts))
}

// sumRefused counts the refusals of every reason.
func sumRefused(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

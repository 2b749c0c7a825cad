package agentcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/agent/trace"
	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/internal/testutil/metricstest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/quant"
)

// TestFlags: bad command lines exit 2 with a message naming the problem,
// -h exits 0, before anything is started.
func TestFlags(t *testing.T) {
	t.Setenv(NodeNameEnv, "")
	dir := t.TempDir()
	badKubeconfig := filepath.Join(dir, "kubeconfig")
	os.WriteFile(badKubeconfig, []byte("this: is: not a kubeconfig"), 0o600)
	// a well-formed kubeconfig (nothing listens there: building the
	// client does not connect)
	kubeconfig := filepath.Join(dir, "ok-kubeconfig")
	os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600)
	site := []string{"--node-name", "n1", "--kubeconfig", kubeconfig, "--no-ebpf", "--site", "factory-1"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "--node-name"},
		{"unknown flag", []string{"--bogus"}, 2, "unknown flag: --bogus"},
		{"stray argument", []string{"--no-annotate", "extra"}, 2, `unknown command "extra" for "edge-agent"`},
		{"mistyped verb", []string{"verison"}, 2, "Did you mean this?\n\tversion"},
		{"mistyped flag", []string{"--no-anotate"}, 2, "did you mean --no-annotate?"},
		{"version with an argument", []string{"version", "x"}, 2, "version takes no arguments"},
		{"bad duration", []string{"--sample-interval", "fast"}, 2, `invalid argument "fast" for "--sample-interval" flag`},
		{"zero duration", []string{"--no-annotate", "--annotate-interval", "0s"}, 2, "--annotate-interval 0s: must be positive"},
		{"negative lease", []string{"--no-annotate", "--lease-duration", "-1s"}, 2, "--lease-duration -1s: must be positive"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "--log-level"},
		{"no node name", nil, 2, "--node-name (or $NODE_NAME) is required"},
		{"missing kubeconfig", []string{"--node-name", "n1", "--kubeconfig", filepath.Join(dir, "nope")}, 2, "--kubeconfig"},
		{"malformed kubeconfig", []string{"--node-name", "n1", "--kubeconfig", badKubeconfig}, 2, "--kubeconfig"},
		{"relative cgroup", []string{"--no-annotate", "--cgroup", "pods"}, 2, "must start with /"},
		{"unknown cgroup", []string{"--no-annotate", "--no-ebpf", "--cgroup", "/edgesched-no-such-cgroup"}, 2, "/edgesched-no-such-cgroup"},
		{"relative tracefs", []string{"--no-annotate", "--tracefs", "sys/kernel/tracing"}, 2, "--tracefs"},
		{"sample slower than annotate", []string{"--no-annotate", "--sample-interval", "20s"}, 2, "--sample-interval 20s is longer than --annotate-interval 10s"},
		// the relation names both flags as typed (it named Config fields:
		// "annotate interval 2m0s must be below half the stale-after bound")
		{"annotate too slow for staleness", []string{"--annotate-interval", "90s"}, 2, "--annotate-interval 1m30s must be below half of --telemetry-max-age 2m0s"},
		{"annotate at half the staleness bound", []string{"--node-name", "n1", "--annotate-interval", "2m", "--telemetry-max-age", "4m"}, 2, "--annotate-interval 2m0s must be below half of --telemetry-max-age 4m0s"},
		{"staleness bound too short", []string{"--node-name", "n1", "--telemetry-max-age", "20s"}, 2, "lower --annotate-interval or raise --telemetry-max-age"},
		{"bad trace events", []string{"--no-annotate", "--trace-max-events", "0"}, 2, "--trace-max-events"},
		{"site flags without --site", []string{"--no-annotate", "--server", "nats://127.0.0.1:4222"}, 2, "--server given without --site"},
		{"deprecated --nats without --site", []string{"--no-annotate", "--nats", "nats://127.0.0.1:4222"}, 2, "--nats given without --site"},
		{"site without node name", []string{"--no-annotate", "--site", "factory-1"}, 2, "--node-name (or $NODE_NAME) is required"},
		{"site without nats", site, 2, "--site needs --server (or $NATS_URL"},
		{"site without key", append(site, "--server", "nats://127.0.0.1:1"), 2, "--site needs --site-key"},
		{"site with a missing key", append(site, "--server", "nats://127.0.0.1:1", "--site-key", filepath.Join(dir, "none.key"), "--model-keys", dir), 2, "--site-key"},
		{"site without model keys", append(site, "--server", "nats://127.0.0.1:1", "--site-key", filepath.Join(dir, "none.key")), 2, "--site needs --model-keys"},
		{"negative model max age", []string{"--no-annotate", "--model-max-age", "-1h"}, 2, "--model-max-age -1h0m0s: must not be negative"},
		{"negative model max age, old name", []string{"--no-annotate", "--max-model-age", "-1h"}, 2, "--model-max-age -1h0m0s: must not be negative"},
		{"bad freeze-after", []string{"--no-annotate", "--freeze-after", "soon"}, 2, `invalid argument "soon" for "--freeze-after" flag`},
		{"freeze flags without --site", []string{"--no-annotate", "--freeze-after", "1h", "--model-max-age", "720h"}, 2, "--freeze-after --model-max-age given without --site"},
		{"empty data dir", []string{"--no-annotate", "--data", ""}, 2, "--data must not be empty"},
		{"old and new name together", []string{"--no-annotate", "--data", "/a", "--data-dir", "/b"}, 2, "--data-dir and --data are the same flag"},
		{"old model-keys name without --site", []string{"--no-annotate", "--trusted-keys", dir}, 2, "--trusted-keys given without --site"},
		{"help lists the new names", []string{"-h"}, 0, "--telemetry-max-age"},
		{"help lists the dependency graph", []string{"-h"}, 0, "--dependencies-configmap"},
		{"zero dependencies interval", []string{"--no-annotate", "--dependencies-interval", "0s"}, 2, "--dependencies-interval 0s: must be positive"},
		{"bad dependencies interval", []string{"--no-annotate", "--dependencies-interval", "often"}, 2, `invalid argument "often" for "--dependencies-interval" flag`},
		{"bad dependencies configmap name", []string{"--no-annotate", "--dependencies-configmap", "Deps_1"}, 2, `--dependencies-configmap: bad ConfigMap reference "Deps_1": name "Deps_1"`},
		{"bad dependencies configmap namespace", []string{"--no-annotate", "--dependencies-configmap", "kube.system/deps"}, 2, `--dependencies-configmap: bad ConfigMap reference "kube.system/deps": namespace "kube.system"`},
		{"dependency flags without --site", []string{"--no-annotate", "--dependencies-configmap", "", "--dependencies-interval", "30s"}, 2, "--dependencies-configmap --dependencies-interval given without --site"},
		{"embeddings without a graph", []string{"--no-annotate", "--site", "s", "--dependencies-configmap", "", "--dependencies-embeddings"}, 2, "--dependencies-embeddings needs a --dependencies-configmap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), tc.args, &stdout, &stderr)
			out := &stderr
			if tc.code == 0 {
				out = &stdout // the help
			}
			if code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d mentioning %q", code, stdout.String(), stderr.String(), tc.code, tc.want)
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runUntilHealthy runs Main with args (plus --no-annotate, --no-ebpf and a
// free metrics address) until /healthz answers, scrapes /metrics, cancels
// and returns the exit code, the log and the metrics text.
func runUntilHealthy(t *testing.T, args ...string) (code int, log, metrics string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"--no-annotate", "--no-ebpf", "--metrics-addr", addr, "--sample-interval", "100ms", "--annotate-interval", "1s"}, args...), io.Discard, &stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if string(body) != "ok\n" {
					t.Fatalf("/healthz body %q", body)
				}
				break
			}
		}
		select {
		case code := <-done:
			t.Fatalf("exited %d before /healthz answered; log:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz not OK within 10 s (last error %v); log:\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop within 10 s of cancel")
	}
	return code, stderr.String(), string(b)
}

// loggedSeed is the seed attribute of the agent's start log (0: none).
func loggedSeed(t *testing.T, log string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`msg="edge-agent starting".* seed=(\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no seed in the start log:\n%s", log)
	}
	v, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSeed: --seed 0 (the default) runs with a drawn, non-zero seed, logged
// once and exported in edgesched_agent_info; a given seed is used as is.
func TestSeed(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want uint64 // 0: any non-zero
	}{
		{"default draws one", nil, 0},
		{"given", []string{"--seed", "42"}, 42},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, log, metrics := runUntilHealthy(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d; log:\n%s", code, log)
			}
			seed := loggedSeed(t, log)
			if seed == 0 || (tc.want != 0 && seed != tc.want) {
				t.Fatalf("logged seed %d, want %d (0: any non-zero)", seed, tc.want)
			}
			if n := strings.Count(log, " seed="); n != 1 {
				t.Errorf("the seed is logged %d times, want once:\n%s", n, log)
			}
			if want := fmt.Sprintf(`edgesched_agent_info{seed="%d"} 1`, seed); !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s:\n%.3000s", want, metrics)
			}
			metricstest.CheckProcessMetricsText(t, metrics, "edge-agent")
		})
	}
}

// TestComponentSeeds: every component gets its own seed, a pure function
// of the run's seed: the same --seed gives the same seeds (a run is
// reproducible from the logged one), another gives other seeds.
func TestComponentSeeds(t *testing.T) {
	a, again, other := componentSeeds(42), componentSeeds(42), componentSeeds(43)
	if len(a) != 7 {
		t.Fatalf("%d component seeds, want 7 (annotator, trace, FL client, site FL, installer, elector, dependency graph)", len(a))
	}
	seen := map[uint64]string{}
	for name, v := range a {
		if prev, dup := seen[v]; dup {
			t.Errorf("%s and %s share seed %d", name, prev, v)
		}
		seen[v] = name
		if v == 42 {
			t.Errorf("%s uses the run's seed itself", name)
		}
		if again[name] != v {
			t.Errorf("%s: seed %d, then %d from the same run seed", name, v, again[name])
		}
		if other[name] == v {
			t.Errorf("%s: seed %d from run seeds 42 and 43 alike", name, v)
		}
	}
}

// TestDeprecatedFlagNames: --data-dir and --trusted-keys (the names before
// the coordinator's spelling was adopted) still work, with one warning
// each naming the new flag.
func TestDeprecatedFlagNames(t *testing.T) {
	dir := t.TempDir()
	code, log, _ := runUntilHealthy(t, "--data-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, log)
	}
	if n := strings.Count(log, "Flag --data-dir has been deprecated, use --data instead"); n != 1 {
		t.Fatalf("%d deprecation warnings for --data-dir, want 1:\n%s", n, log)
	}
	code, log, _ = runUntilHealthy(t, "--data", dir)
	if code != 0 || strings.Contains(log, "deprecated") {
		t.Fatalf("exit %d with --data; want 0 and no deprecation warning:\n%s", code, log)
	}
}

// fakeTrust is a trustSource with a fixed status.
type fakeTrust struct {
	s   flclient.TrustStatus
	err error
}

func (f fakeTrust) TrustStatus() (flclient.TrustStatus, error) { return f.s, f.err }

// TestModelMetrics: the site leader exports whether its model feed is
// frozen (by reason), the installed version and the model's age; a
// standby exports nothing (its store is its last term's).
func TestModelMetrics(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	created := now.Add(-90 * time.Minute) // age 5400 s
	cases := []struct {
		name    string
		leading bool
		trust   fakeTrust
		want    string // exposition of the three metrics
	}{
		{"standby", false, fakeTrust{s: flclient.TrustStatus{HighestVersion: 3, ModelCreated: created}}, ""},
		{"leader, no model yet", true, fakeTrust{}, `
edgesched_agent_model_frozen{reason="behind_announcements"} 0
edgesched_agent_model_frozen{reason="model_too_old"} 0
edgesched_agent_model_version 0
`},
		{"leader, fresh", true, fakeTrust{s: flclient.TrustStatus{HighestVersion: 3, ModelCreated: created}}, `
edgesched_agent_model_age_seconds 5400
edgesched_agent_model_frozen{reason="behind_announcements"} 0
edgesched_agent_model_frozen{reason="model_too_old"} 0
edgesched_agent_model_version 3
`},
		{"leader, frozen behind announcements", true, fakeTrust{s: flclient.TrustStatus{HighestVersion: 3, Announced: 5, ModelCreated: created,
			Frozen: &flclient.Freeze{Reason: flclient.FrozenBehind}}}, `
edgesched_agent_model_age_seconds 5400
edgesched_agent_model_frozen{reason="behind_announcements"} 1
edgesched_agent_model_frozen{reason="model_too_old"} 0
edgesched_agent_model_version 3
`},
		{"leader, model too old", true, fakeTrust{s: flclient.TrustStatus{HighestVersion: 3, ModelCreated: created,
			Frozen: &flclient.Freeze{Reason: flclient.FrozenAged}}}, `
edgesched_agent_model_age_seconds 5400
edgesched_agent_model_frozen{reason="behind_announcements"} 0
edgesched_agent_model_frozen{reason="model_too_old"} 1
edgesched_agent_model_version 3
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &modelCollector{trust: tc.trust, leading: func() bool { return tc.leading }, now: func() time.Time { return now }}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			if got, want := metricsText(t, reg), strings.TrimPrefix(tc.want, "\n"); got != want {
				t.Fatalf("metrics:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	// A store that cannot be read fails the scrape with the reason.
	reg := prometheus.NewRegistry()
	reg.MustRegister(&modelCollector{trust: fakeTrust{err: errors.New("bolt: database not open")}, leading: func() bool { return true }, now: time.Now})
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "database not open") {
		t.Fatalf("gather with an unreadable store: %v", err)
	}
}

// TestTraceCollector: the recorder's counters are exported as they are,
// one series per result, on a pedantic registry (which checks the
// descriptors and label consistency).
func TestTraceCollector(t *testing.T) {
	stats := trace.RecorderStats{Recorded: 40, Skipped: 7, Pruned: 3, Refused: 2, Malformed: 1, WriteErrors: 5, FlowsPublished: 9}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&traceCollector{stats: func() trace.RecorderStats { return stats }})
	got := metricsText(t, reg)
	want := `edgesched_agent_trace_events_total{result="malformed"} 1
edgesched_agent_trace_events_total{result="pruned"} 3
edgesched_agent_trace_events_total{result="recorded"} 40
edgesched_agent_trace_events_total{result="refused"} 2
edgesched_agent_trace_events_total{result="skipped"} 7
edgesched_agent_trace_flows_published_total 9
edgesched_agent_trace_write_errors_total 5
`
	if got != want {
		t.Fatalf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

// metricsText renders reg's samples, one `name{label="value"} value` line
// each (first label only; gauges and counters), in the registry's order.
func metricsText(t testing.TB, reg prometheus.Gatherer) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			if l := m.GetLabel(); len(l) > 0 {
				fmt.Fprintf(&b, "{%s=%q}", l[0].GetName(), l[0].GetValue())
			}
			v := m.GetGauge().GetValue()
			if c := m.GetCounter(); c != nil {
				v = c.GetValue()
			}
			fmt.Fprintf(&b, " %g\n", v)
		}
	}
	return b.String()
}

// TestRunAndStop runs the agent without a cluster (--no-annotate), on
// /proc only, serves /healthz and /metrics, and stops with exit 0 when
// its context ends (what SIGTERM does in cmd/edge-agent).
func TestRunAndStop(t *testing.T) {
	code, log, metrics := runUntilHealthy(t)
	if code != 0 {
		t.Fatalf("exit %d after cancel; log:\n%s", code, log)
	}
	if !strings.Contains(metrics, `edgesched_agent_telemetry_source{source="proc"} 1`) {
		t.Fatalf("/metrics lacks the source gauge:\n%.2000s", metrics)
	}
	for _, want := range []string{"eBPF telemetry disabled", "edge-agent stopped"} {
		if !strings.Contains(log, want) {
			t.Fatalf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestNoAnnotateIgnoresStaleness: with --no-annotate nothing is written,
// so the staleness bound does not limit --annotate-interval (still the
// summary window): an interval of half --telemetry-max-age or more runs.
// It was refused (exit 2) naming neither flag.
func TestNoAnnotateIgnoresStaleness(t *testing.T) {
	for _, args := range [][]string{
		{"--annotate-interval", "2m"},
		{"--annotate-interval", "30s", "--telemetry-max-age", "1m"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if code, log, _ := runUntilHealthy(t, args...); code != 0 {
				t.Fatalf("exit %d; log:\n%s", code, log)
			}
		})
	}
}

// TestSiteDependencyGraph builds the site leader from flags against the
// fake API (NATS unreachable: the FL client only retries) and runs it: the
// agent wins the Lease and its dependency graph publisher writes the
// (empty: nothing recorded) graph into the ConfigMap the flag names, or,
// with --dependencies-configmap "", no publisher is built (its metrics are
// not registered) and no such ConfigMap appears.
func TestSiteDependencyGraph(t *testing.T) {
	dir := t.TempDir()
	siteSigner, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{1}))
	if err != nil {
		t.Fatal(err)
	}
	coord, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{2}))
	if err != nil {
		t.Fatal(err)
	}
	siteKey, _, err := quant.WriteKeyPair(dir, "site", siteSigner)
	if err != nil {
		t.Fatal(err)
	}
	keysDir := filepath.Join(dir, "keys")
	if err := os.Mkdir(keysDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := quant.WriteKeyPair(keysDir, "coordinator", coord); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		args       []string
		ns, cm     string // "": no publisher
		interval   time.Duration
		embeddings bool
	}{
		{"default", nil, "edgesched-system", "edgesched-dependencies", time.Minute, false},
		{"namespace/name and interval", []string{"--dependencies-configmap", "kube-system/deps", "--dependencies-interval", "30s"}, "kube-system", "deps", 30 * time.Second, false},
		{"name in --namespace", []string{"--namespace", "edge", "--dependencies-configmap", "deps"}, "edge", "deps", time.Minute, false},
		{"disabled", []string{"--dependencies-configmap", ""}, "", "", 0, false},
		{"embeddings", []string{"--dependencies-embeddings"}, "edgesched-system", "edgesched-dependencies", time.Minute, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o options
			fs := pflag.NewFlagSet("edge-agent", pflag.ContinueOnError)
			addFlags(fs, &o)
			args := append([]string{"--node-name", "n1", "--site", "lab-1", "--server", "nats://127.0.0.1:1", "--site-key", siteKey,
				"--model-keys", keysDir, "--data", filepath.Join(dir, fmt.Sprint(i))}, tc.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := o.checkConfigMaps(); err != nil {
				t.Fatal(err)
			}
			if o.dependenciesInterval != tc.interval && tc.cm != "" {
				t.Fatalf("interval %v, want %v", o.dependenciesInterval, tc.interval)
			}
			o.seed = 5
			client := fake.NewClientset()
			reg := prometheus.NewRegistry()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			sp, err := buildSite(&o, kubeclientset.Wrap(client), reg, log)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, c := range sp.components {
				wg.Go(func() { _ = c.Run(ctx) })
			}
			defer func() { cancel(); wg.Wait(); sp.close(log) }()
			n, err := testutil.GatherAndCount(reg, "edgesched_site_dependency_graph_edges")
			if err != nil || (n == 1) != (tc.cm != "") {
				t.Fatalf("edges gauge registered %d times (%v), want it with a publisher only", n, err)
			}
			if tc.cm == "" {
				// the elector's metric proves the leader was built; once
				// it leads, its components run, and none writes a graph
				if n, _ := testutil.GatherAndCount(reg, "edgesched_site_is_leader"); n != 1 {
					t.Fatal("no site elector")
				}
				fltest.Eventually(t, 10*time.Second, "the agent to lead its site", func() (bool, string) {
					m := metricsText(t, reg)
					return strings.Contains(m, `edgesched_site_is_leader{site="lab-1"} 1`+"\n"), m
				})
				cms, err := client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, cm := range cms.Items {
					if _, ok := cm.Data[kubefmt.DependenciesConfigMapKey]; ok {
						t.Fatalf("publisher disabled, yet %s/%s holds a dependency graph", cm.Namespace, cm.Name)
					}
				}
				return
			}
			fltest.Eventually(t, 10*time.Second, "the leader to write the dependency graph", func() (bool, string) {
				cm, err := client.CoreV1().ConfigMaps(tc.ns).Get(ctx, tc.cm, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				g, err := kubefmt.DecodeDependencyGraph([]byte(cm.Data[kubefmt.DependenciesConfigMapKey]))
				if err != nil {
					return false, err.Error()
				}
				// with --dependencies-embeddings the (empty) graph's
				// embeddings are written beside it, from the pre-trained
				// encoder; without, none
				raw, has := cm.Data[kubefmt.EmbeddingsConfigMapKey]
				if has != tc.embeddings {
					return false, fmt.Sprintf("embeddings present: %v", has)
				}
				if has {
					m, err := kubefmt.DecodeEmbeddings([]byte(raw))
					if err != nil || !strings.HasPrefix(m.Encoder, "sage-") || len(m.Services) != 0 {
						return false, fmt.Sprintf("embeddings %+v, %v", m, err)
					}
				}
				return len(g.Edges) == 0 && g.Window == "10m0s" && cm.Labels["edgesched.io/site"] == "lab-1", fmt.Sprintf("%+v %v", g, cm.Labels)
			})
		})
	}
}

//go:build unix

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/openb"
	"github.com/edgesched/edgesched/sim/scenario"
)

// This file is the scale harness (issue 27; docs/scale.md): kine +
// kube-apiserver on loopback, ScaleConfig.Nodes Node objects with openb's
// heterogeneous capacity and labels (the 1,523 openb nodes repeated under
// new names, zones edge-a/b/c; readied by the harness, no kubelet), and
// saturated batches (the scheduler paused while a batch is created, as in
// throughput_e2e_test.go) of pods taken in turn from openb:default and from
// the builtin:retail-fleet edge scenario. Three phases, each its own
// processes, in one run:
//
//   - side by side: one edge-scheduler with the shipped EdgePolicy profile
//     (schedulerName edgesched) and a profile of kube-scheduler's default
//     plugins (default-plugins), batches alternating between them;
//   - memory: edge-scheduler with one of those profiles alone, one batch
//     each, for the process's resident memory per profile;
//   - extender: the stock kube-scheduler configured from
//     deploy/edge-scheduler/k3s-extender.yaml with `edge-scheduler
//     extender`, against a stock kube-scheduler without it (profile
//     "stock"), batches alternating.
//
// Every scheduler gets qps/burst ScaleConfig.QPS (as scheduler_perf does):
// the client's limit, not the scheduler, would otherwise set the rate.
// With ScaleConfig.TelemetryEvery > 0 a refresher rewrites every node's
// telemetry annotation once per that period (spread evenly), as the edge
// agents would.
//
// Measured per batch: pods/s from the resume to the last binding seen by a
// watch; the mean per extension point and per scheduling attempt from the
// scheduler's own metrics (the batch's difference); CPU seconds of the
// scheduler, kube-apiserver and kine over the batch (/proc/PID/stat); the
// scheduler's resident memory after the batch (VmRSS, and VmHWM). Asserted:
// only what can fail on any machine (every pod binds and fits, no attempt
// fails, EdgePolicy scored with its model); rates and ratios are reported
// in a table and in JSON (ScaleConfig.Out), never asserted.

// ScaleConfig sizes the harness. `make test` runs DefaultScaleConfig;
// `make bench-scale` sets the EDGESCHED_SCALE_* variables (scaleConfigFromEnv).
type ScaleConfig struct {
	// Nodes is the number of Node objects (EDGESCHED_SCALE_NODES).
	Nodes int
	// Pods is the number of pods per batch (EDGESCHED_SCALE_PODS).
	Pods int
	// Rounds is the number of batches per profile in the side-by-side and
	// extender phases (EDGESCHED_SCALE_ROUNDS); medians are over them.
	Rounds int
	// QPS is every scheduler's client qps and burst (EDGESCHED_SCALE_QPS).
	QPS int
	// TelemetryEvery is the period of each node's telemetry annotation
	// refresh; 0 turns the refresher off (EDGESCHED_SCALE_TELEMETRY, a Go
	// duration).
	TelemetryEvery time.Duration
	// ExtenderPods is the batch size of the extender phase
	// (EDGESCHED_SCALE_EXTENDER_PODS; 0: Pods): extender mode sends every
	// Node object in each call, so at thousands of nodes it is slower by
	// an order of magnitude or more.
	ExtenderPods int
	// Extender and Memory run those phases (EDGESCHED_SCALE_PHASES, a
	// comma-separated subset of side,memory,extender; side always runs).
	Extender, Memory bool
	// Out is the JSON report's path; empty writes none (EDGESCHED_SCALE_OUT).
	Out string
	// PprofDir, when set, receives a CPU profile of the scheduler over each
	// recorded batch, from its /debug/pprof/profile endpoint
	// (EDGESCHED_SCALE_PPROF): PHASE-PROFILE-rROUND.pprof. The profile runs
	// for a fixed time from the batch's start (5 s plus 10 ms a pod, which
	// covers creating, scheduling and deleting a batch at this machine's
	// rates), and the batch waits for it, so profiled runs are slower
	// between batches; compare profiles with go tool pprof -diff_base.
	PprofDir string
}

// DefaultScaleConfig is the small run of `make test`: 200 nodes, batches of
// 150 pods, one round, every phase, telemetry refreshed every 20 s.
func DefaultScaleConfig() ScaleConfig {
	return ScaleConfig{Nodes: 200, Pods: 150, Rounds: 1, QPS: 5000, TelemetryEvery: 20 * time.Second, Extender: true, Memory: true}
}

// Validate reports a configuration that cannot run.
func (c ScaleConfig) Validate() error {
	var errs []error
	if c.Nodes < 3 || c.Nodes > 20000 {
		errs = append(errs, fmt.Errorf("nodes %d not in [3, 20000]", c.Nodes))
	}
	if c.Pods < 1 || c.Pods > 20000 {
		errs = append(errs, fmt.Errorf("pods %d not in [1, 20000]", c.Pods))
	}
	if c.Rounds < 1 || c.Rounds > 100 {
		errs = append(errs, fmt.Errorf("rounds %d not in [1, 100]", c.Rounds))
	}
	if c.ExtenderPods < 0 || c.ExtenderPods > 20000 {
		errs = append(errs, fmt.Errorf("extender pods %d not in [0, 20000]", c.ExtenderPods))
	}
	if c.QPS < 1 {
		errs = append(errs, fmt.Errorf("qps %d below 1", c.QPS))
	}
	if c.TelemetryEvery < 0 || (c.TelemetryEvery > 0 && c.TelemetryEvery < time.Second) {
		errs = append(errs, fmt.Errorf("telemetry period %s: 0 (off) or at least 1s", c.TelemetryEvery))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("scale config: %w", err)
	}
	return nil
}

// scaleConfigFromEnv is DefaultScaleConfig with the EDGESCHED_SCALE_*
// variables applied.
func scaleConfigFromEnv() (ScaleConfig, error) {
	c := DefaultScaleConfig()
	for _, v := range []struct {
		env string
		dst *int
	}{{"EDGESCHED_SCALE_NODES", &c.Nodes}, {"EDGESCHED_SCALE_PODS", &c.Pods}, {"EDGESCHED_SCALE_ROUNDS", &c.Rounds}, {"EDGESCHED_SCALE_QPS", &c.QPS},
		{"EDGESCHED_SCALE_EXTENDER_PODS", &c.ExtenderPods}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return c, fmt.Errorf("%s: %w", v.env, err)
			}
			*v.dst = n
		}
	}
	if s := os.Getenv("EDGESCHED_SCALE_TELEMETRY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return c, fmt.Errorf("EDGESCHED_SCALE_TELEMETRY: %w", err)
		}
		c.TelemetryEvery = d
	}
	c.PprofDir = os.Getenv("EDGESCHED_SCALE_PPROF")
	if s := os.Getenv("EDGESCHED_SCALE_PHASES"); s != "" {
		c.Extender, c.Memory = false, false
		for _, p := range strings.Split(s, ",") {
			switch strings.TrimSpace(p) {
			case "side":
			case "memory":
				c.Memory = true
			case "extender":
				c.Extender = true
			default:
				return c, fmt.Errorf("EDGESCHED_SCALE_PHASES: unknown phase %q (side, memory, extender)", p)
			}
		}
	}
	c.Out = os.Getenv("EDGESCHED_SCALE_OUT")
	return c, c.Validate()
}

// scaleNodes is n openb nodes under the names scale-00000..., in zones
// edge-a, edge-b, edge-c: SelectNodes's pick below the trace's 1,523, the
// trace repeated in order above.
func scaleNodes(n int) ([]sim.NodeSpec, error) {
	all, err := openb.LoadNodes("openb:"+openb.AllNodes, nil)
	if err != nil {
		return nil, err
	}
	if n < len(all) {
		all = SelectNodes(all, n) // every shape of node, as the other e2e tests pick them
	}
	zones := []string{"edge-a", "edge-b", "edge-c"}
	out := make([]sim.NodeSpec, n)
	for i := range out {
		s := all[i%len(all)]
		s.Name, s.Zone = fmt.Sprintf("scale-%05d", i), zones[i%len(zones)]
		out[i] = s
	}
	return out, nil
}

// scaleShapes is the pod stream: openb:default's pods and
// builtin:retail-fleet's (seed 1) in turn, as test pods (requests, GPU
// devices or share, accepted GPU models, QoS), leaving out pods that fit
// no node of the fleet alone (e.g. 8 GPUs of a model no node has 8 of). It also returns the number of distinct
// shapes in the stream.
func scaleShapes(nodes []sim.NodeSpec) ([]edgeShape, int, error) {
	ob, err := openb.LoadPods("openb:"+openb.Default, nil)
	if err != nil {
		return nil, 0, err
	}
	seed := uint64(1)
	edge, err := scenario.LoadWith("builtin:retail-fleet", scenario.Options{Seed: &seed})
	if err != nil {
		return nil, 0, err
	}
	models := map[string]bool{}
	for _, n := range nodes {
		if n.GPUs > 0 {
			models[n.GPUModel] = true
		}
	}
	fitsOne := func(p sim.PodSpec) bool {
		return slices.ContainsFunc(nodes, func(n sim.NodeSpec) bool {
			return p.CPU <= n.CPU && p.Memory <= n.Memory && p.GPUs <= n.GPUs &&
				(p.GPUs == 0 || len(p.GPUSpec) == 0 || slices.Contains(p.GPUSpec, n.GPUModel))
		})
	}
	convert := func(p sim.PodSpec) (edgeShape, bool) {
		if !fitsOne(p) {
			return edgeShape{}, false
		}
		s := edgeShape{cpu: resource.NewMilliQuantity(p.CPU, resource.DecimalSI).String(),
			mem: resource.NewQuantity(p.Memory<<20, resource.BinarySI).String()}
		if p.QoS != sim.QoSBurstable {
			s.qos = p.QoS.String()
		}
		switch {
		case p.GPUs == 1 && p.GPUMilli < sim.MilliGPU:
			s.milli = p.GPUMilli
		case p.GPUs > 0:
			s.gpus = int64(p.GPUs)
		}
		if p.GPUs > 0 && len(p.GPUSpec) > 0 {
			if !slices.ContainsFunc(p.GPUSpec, func(m string) bool { return models[m] }) {
				return s, false
			}
			s.models = strings.Join(p.GPUSpec, ",")
		}
		return s, true
	}
	var a, b []edgeShape
	for _, p := range ob.Pods {
		if s, ok := convert(p); ok {
			a = append(a, s)
		}
	}
	for _, p := range edge.Workload.Pods {
		if s, ok := convert(p); ok {
			b = append(b, s)
		}
	}
	if len(a) == 0 || len(b) == 0 {
		return nil, 0, fmt.Errorf("scale pods: %d openb and %d edge pods", len(a), len(b))
	}
	var out []edgeShape
	for i := range max(len(a), len(b)) {
		if i < len(a) {
			out = append(out, a[i])
		}
		if i < len(b) {
			out = append(out, b[i])
		}
	}
	distinct := map[edgeShape]bool{}
	for _, s := range out {
		distinct[s] = true
	}
	return out, len(distinct), nil
}

// procStat is a process's CPU seconds (user + system) and resident memory.
type procStat struct {
	cpu      float64
	rss, hwm int64 // bytes
}

// readProc reads /proc/PID/stat and /proc/PID/status (Linux; zero values
// elsewhere).
func readProc(pid int) procStat {
	var ps procStat
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// fields after the command's closing parenthesis: utime is the 12th, stime the 13th
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseFloat(f[11], 64)
				s, _ := strconv.ParseFloat(f[12], 64)
				ps.cpu = (u + s) / 100 // USER_HZ is 100 on Linux
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				ps.rss = kb << 10
			case "VmHWM:":
				ps.hwm = kb << 10
			}
		}
	}
	return ps
}

// scaleRow is one batch in the report.
type scaleRow struct {
	Phase   string  `json:"phase"`
	Profile string  `json:"profile"`
	Round   int     `json:"round"`
	Pods    int     `json:"pods"`
	PodsPS  float64 `json:"pods_per_s"`
	// AttemptMs is the mean scheduling attempt; ExtensionMs the mean per
	// extension point (scheduler metrics, this batch's difference).
	AttemptMs   float64            `json:"attempt_ms"`
	ExtensionMs map[string]float64 `json:"extension_point_ms"`
	// CPU seconds per pod of the scheduler, kube-apiserver and kine over
	// the batch (from the creation of its first pod to its last binding).
	SchedCPUPerPodMs  float64 `json:"scheduler_cpu_ms_per_pod"`
	APIServerCPUPerPo float64 `json:"apiserver_cpu_ms_per_pod"`
	KineCPUPerPodMs   float64 `json:"kine_cpu_ms_per_pod"`
	RSSMiB            float64 `json:"scheduler_rss_mib"`
	HWMMiB            float64 `json:"scheduler_peak_rss_mib"`
	// CacheHitRate is EdgePolicy's score cache hit rate over the batch
	// (-1: not EdgePolicy).
	CacheHitRate float64 `json:"cache_hit_rate"`
}

// scaleReport is the JSON document.
type scaleReport struct {
	Config struct {
		Nodes, Pods, Rounds, QPS int
		Telemetry                string
		DistinctShapes           int `json:"distinct_shapes"`
	} `json:"config"`
	Batches []scaleRow         `json:"batches"`
	Median  map[string]float64 `json:"median_pods_per_s"` // by phase/profile
	Ratios  map[string]float64 `json:"ratios"`
	// Paired is each ratio again from the rounds' pairs (the two profiles'
	// batches of one round run back to back on the same pods): the ratio
	// of a round's two rates, averaged over rounds on a log scale. A
	// round's pair shares the machine's load at that moment, so this is
	// less noisy than the ratio of medians when the load drifts.
	Paired map[string]pairedRatio `json:"paired_ratios"`
	// MemoryMiB is the scheduler's resident memory after its batch in the
	// memory phase, by profile (and peak, "-peak").
	MemoryMiB map[string]float64 `json:"memory_mib"`
}

// scaleRig is the running harness.
type scaleRig struct {
	*tpRig
	cfg    ScaleConfig
	shapes []edgeShape
	next   int // the stream's next pod
	dir    string
	sm     signedModel
	bins   []string // kine, kube-apiserver, kube-scheduler, edge-scheduler
	rep    scaleReport
}

// batchShapes is the stream's next n pods (the same for every profile of
// a round: call once per round).
func (s *scaleRig) batchShapes(n int) []edgeShape {
	out := make([]edgeShape, n)
	for i := range out {
		out[i] = s.shapes[(s.next+i)%len(s.shapes)]
	}
	s.next += n
	return out
}

// warmUp runs an unrecorded batch of a fifth of n pods (at least 10) for
// each profile: a new process's first cycles build its caches (EdgePolicy:
// the environment, the view, the score cache).
func (s *scaleRig) warmUp(ctx context.Context, t *testing.T, n int, runs ...warmRun) {
	t.Helper()
	shapes := s.batchShapes(max(10, n/5))
	for _, r := range runs {
		res := s.run(ctx, t, r.p, r.profile, tpSaturated, shapes, time.Minute+time.Duration(len(shapes))*time.Second)
		t.Logf("warm-up  %-15s %d pods, %.1f pods/s (not recorded)", r.profile, res.pods, res.podsPerS)
	}
}

// warmRun is a scheduler process and one of its profiles.
type warmRun struct {
	p       *Process
	profile string
}

// measure runs one saturated batch of shapes for profile on sched and
// records it.
func (s *scaleRig) measure(ctx context.Context, t *testing.T, phase string, round int, sched *Process, profile string, shapes []edgeShape) scaleRow {
	t.Helper()
	m0, err := scrapeMetrics(ctx, sched.URL+"/metrics", s.cp.Token)
	if err != nil {
		t.Fatal(err)
	}
	var prof chan error
	if s.cfg.PprofDir != "" {
		if err := os.MkdirAll(s.cfg.PprofDir, 0o755); err != nil {
			t.Fatalf("EDGESCHED_SCALE_PPROF: %v", err)
		}
		prof = make(chan error, 1)
		path := filepath.Join(s.cfg.PprofDir, fmt.Sprintf("%s-%s-r%d.pprof", phase, profile, round))
		secs := 5 + len(shapes)/100
		go func() { prof <- fetchProfile(ctx, sched.URL, s.cp.Token, secs, path) }()
	}
	p0, a0, k0 := readProc(sched.PID()), readProc(s.cp.APIServer.PID()), readProc(s.cp.Kine.PID())
	timeout := time.Minute + time.Duration(len(shapes))*time.Second
	res := s.run(ctx, t, sched, profile, tpSaturated, shapes, timeout)
	if prof != nil {
		if err := <-prof; err != nil {
			t.Errorf("CPU profile of %s round %d: %v", profile, round, err)
		}
	}
	p1, a1, k1 := readProc(sched.PID()), readProc(s.cp.APIServer.PID()), readProc(s.cp.Kine.PID())
	m1, err := scrapeMetrics(ctx, sched.URL+"/metrics", s.cp.Token)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(res.pods)
	row := scaleRow{Phase: phase, Profile: profile, Round: round, Pods: res.pods, PodsPS: res.podsPerS,
		SchedCPUPerPodMs: (p1.cpu - p0.cpu) / n * 1000, APIServerCPUPerPo: (a1.cpu - a0.cpu) / n * 1000,
		KineCPUPerPodMs: (k1.cpu - k0.cpu) / n * 1000, RSSMiB: float64(p1.rss) / (1 << 20), HWMMiB: float64(p1.hwm) / (1 << 20),
		ExtensionMs: map[string]float64{}, CacheHitRate: -1}
	sel := `profile="` + profile + `"`
	delta := func(name string, labels ...string) float64 { return m1.sum(name, labels...) - m0.sum(name, labels...) }
	if c := delta("scheduler_scheduling_attempt_duration_seconds_count", sel); c > 0 {
		row.AttemptMs = delta("scheduler_scheduling_attempt_duration_seconds_sum", sel) / c * 1000
	}
	for _, ep := range []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "PreBind", "Bind"} {
		l := `extension_point="` + ep + `"`
		if c := delta("scheduler_framework_extension_point_duration_seconds_count", sel, l); c > 0 {
			row.ExtensionMs[ep] = delta("scheduler_framework_extension_point_duration_seconds_sum", sel, l) / c * 1000
		}
	}
	if profile == edgeSchedulerName {
		hit, miss := delta("edgesched_plugin_score_cache_total", `result="hit"`), delta("edgesched_plugin_score_cache_total", `result="miss"`)
		if hit+miss > 0 {
			row.CacheHitRate = hit / (hit + miss)
		}
	}
	failed := delta("scheduler_schedule_attempts_total", sel, `result="unschedulable"`) + delta("scheduler_schedule_attempts_total", sel, `result="error"`)
	if failed != 0 {
		t.Errorf("%s %s round %d: %v failed scheduling attempts", phase, profile, round, failed)
	}
	s.rep.Batches = append(s.rep.Batches, row)
	t.Logf("%-8s %-15s round %d: %d pods, %.1f pods/s, attempt %.3f ms, scheduler CPU %.2f ms/pod, RSS %.0f MiB",
		phase, profile, round, row.Pods, row.PodsPS, row.AttemptMs, row.SchedCPUPerPodMs, row.RSSMiB)
	return row
}

// fetchProfile saves a CPU profile of secs seconds from the program's
// secure port (base, bearer token) to path.
func fetchProfile(ctx context.Context, base, token string, secs int, path string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	hc := insecureHTTPClient()
	hc.Timeout = 0 // the profile takes secs; ctx bounds the request
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the profile: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}

// schedulerConfig writes edge-scheduler's configuration with the shipped
// EdgePolicy profile and/or the default-plugins profile, client qps and
// burst cfg.QPS.
func (s *scaleRig) schedulerConfig(t *testing.T, name string, profiles ...string) string {
	t.Helper()
	kubeconfig, err := s.cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path, _ := deploySchedulerConfig(t, s.dir, kubeconfig, s.sm.modelPath, s.sm.keyDir)
	cfg := readYAML(t, path)
	var out []any
	for _, p := range profiles {
		if p == edgeSchedulerName {
			out = append(out, cfg["profiles"].([]any)[0])
		} else {
			out = append(out, map[string]any{"schedulerName": p})
		}
	}
	cfg["profiles"] = out
	return s.writeConfig(t, name, cfg)
}

// writeConfig sets cfg's client qps and burst to cfg.QPS and writes it
// into the rig's directory.
func (s *scaleRig) writeConfig(t *testing.T, name string, cfg map[string]any) string {
	t.Helper()
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["qps"], conn["burst"] = s.cfg.QPS, s.cfg.QPS
	cfg["clientConnection"] = conn
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.dir, name+".yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg
}

// startEdgeScheduler starts edge-scheduler with profiles and, when one is
// EdgePolicy's, waits until its model is loaded.
func (s *scaleRig) startEdgeScheduler(ctx context.Context, t *testing.T, name string, profiles ...string) *Process {
	t.Helper()
	p := s.cp.StartScheduler(t, SchedulerOptions{Binary: s.bins[3], Name: name, ConfigFile: s.schedulerConfig(t, name, profiles...),
		Verbosity: 1, ReadyTimeout: 3 * time.Minute})
	if slices.Contains(profiles, edgeSchedulerName) {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			m, err := scrapeMetrics(ctx, p.URL+"/metrics", s.cp.Token)
			return err == nil && m.sum("edgesched_plugin_model_version") == 1, nil
		})
		if err != nil {
			t.Fatalf("%s did not load the model: %v", name, err)
		}
	}
	return p
}

// refreshTelemetry rewrites every node's telemetry annotation once per
// cfg.TelemetryEvery, spread evenly, with a fresh time stamp and a
// utilisation drawn from the node's index and the round (deterministic),
// until ctx ends. It returns the number of patches written.
func (s *scaleRig) refreshTelemetry(ctx context.Context, t *testing.T) (stop func() int) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	patches, failures := 0, 0
	if s.cfg.TelemetryEvery <= 0 {
		return func() int { cancel(); return 0 }
	}
	gap := s.cfg.TelemetryEvery / time.Duration(len(s.nodes))
	wg.Go(func() {
		tick := time.NewTicker(max(gap, time.Millisecond))
		defer tick.Stop()
		per := max(1, int(time.Millisecond/max(gap, 1))) // nodes per tick when the gap is under 1 ms
		for i := 0; ; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for range per {
				n := s.nodes[i%len(s.nodes)].Name
				round := i / len(s.nodes)
				cpu := float64((i*7919+round*104729)%90+5) / 100
				runq := float64((i*31+round*17)%5000 + 20)
				v, err := kubefmt.EncodeTelemetry(kubefmt.TelemetrySummary{Time: time.Now(), Window: 10 * time.Second, CPU: cpu, Mem: 0.5, Load1: 1, RunQueueP99Us: &runq})
				if err == nil {
					patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{kubefmt.AnnotationTelemetry: v}}})
					_, err = s.cp.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{})
				}
				mu.Lock()
				if err == nil {
					patches++
				} else if ctx.Err() == nil {
					failures++
				}
				mu.Unlock()
				i++
			}
		}
	})
	return func() int {
		cancel()
		wg.Wait()
		if failures > 0 {
			t.Errorf("telemetry refresher: %d patches failed", failures)
		}
		return patches
	}
}

// TestScale runs the scale harness (file comment) with scaleConfigFromEnv:
// by default the small run of `make test`; `make bench-scale` runs 5,000
// nodes.
func TestScale(t *testing.T) {
	cfg, err := scaleConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	bins := Build(t, KinePkg, APIServerPkg, SchedulerPkg, "github.com/edgesched/edgesched/cmd/edge-scheduler")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()

	specs, err := scaleNodes(cfg.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	artCh := make(chan error, 1)
	var art *quant.Artifact
	go func() { // calibration on the first 200 nodes (the model does not depend on the fleet's size)
		var err error
		cl := &sim.Cluster{Name: "calibration", Nodes: specs[:min(len(specs), 200)], Zones: []sim.Zone{{Name: "edge-a"}, {Name: "edge-b"}, {Name: "edge-c"}}}
		art, err = quantizeModel(cl, "default", 1)
		artCh <- err
	}()
	cp := Start(t, Options{QPS: 2000, Burst: 4000})
	reg := time.Now()
	if _, err := RegisterNodes(ctx, cp.Client, specs, 0); err != nil {
		t.Fatal(err)
	}
	list, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != cfg.Nodes {
		t.Fatalf("registered %d nodes, want %d", len(list.Items), cfg.Nodes)
	}
	t.Logf("%d nodes registered and ready in %s", cfg.Nodes, time.Since(reg).Round(time.Millisecond))
	if err := <-artCh; err != nil {
		t.Fatal(err)
	}
	s := &scaleRig{tpRig: &tpRig{cp: cp, nodes: list.Items}, cfg: cfg, dir: t.TempDir(), bins: bins}
	s.sm = writeSignedModel(t, s.dir, art)
	var distinct int
	if s.shapes, distinct, err = scaleShapes(specs); err != nil {
		t.Fatal(err)
	}
	s.rep.Config.Nodes, s.rep.Config.Pods, s.rep.Config.Rounds, s.rep.Config.QPS = cfg.Nodes, cfg.Pods, cfg.Rounds, cfg.QPS
	s.rep.Config.Telemetry, s.rep.Config.DistinctShapes = cfg.TelemetryEvery.String(), distinct
	t.Logf("pod stream: %d pods, %d distinct shapes (openb:default and builtin:retail-fleet in turn)", len(s.shapes), distinct)
	stopTel := s.refreshTelemetry(ctx, t)

	// Side by side: one process, both profiles, batches alternating.
	profiles := []string{edgeSchedulerName, tpDefaultProfile}
	sched := s.startEdgeScheduler(ctx, t, "edge-scheduler-side", profiles...)
	s.warmUp(ctx, t, cfg.Pods, warmRun{sched, edgeSchedulerName}, warmRun{sched, tpDefaultProfile})
	rates := map[string][]float64{}
	for round := range cfg.Rounds {
		shapes := s.batchShapes(cfg.Pods)
		order := slices.Clone(profiles)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, p := range order {
			row := s.measure(ctx, t, "side", round, sched, p, shapes)
			rates["side/"+p] = append(rates["side/"+p], row.PodsPS)
		}
	}
	sched.Stop()

	s.rep.MemoryMiB = map[string]float64{}
	if cfg.Memory {
		shapes := s.batchShapes(cfg.Pods)
		for _, p := range profiles {
			proc := s.startEdgeScheduler(ctx, t, "edge-scheduler-"+p, p)
			s.warmUp(ctx, t, cfg.Pods, warmRun{proc, p})
			row := s.measure(ctx, t, "memory", 0, proc, p, shapes)
			s.rep.MemoryMiB[p], s.rep.MemoryMiB[p+"-peak"] = row.RSSMiB, row.HWMMiB
			proc.Stop()
		}
	}

	if cfg.Extender {
		ext, base := startExtender(t, cp, bins[3], s.sm)
		kubeconfig, err := cp.Kubeconfig()
		if err != nil {
			t.Fatal(err)
		}
		extCfg := s.writeConfig(t, "k3s-extender-scale", readYAML(t, k3sExtenderConfig(t, s.dir, kubeconfig, base)))
		stockCfg := s.writeConfig(t, "stock", map[string]any{
			"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
			"clientConnection": map[string]any{"kubeconfig": kubeconfig}, "leaderElection": map[string]any{"leaderElect": false},
			"profiles": []any{map[string]any{"schedulerName": "stock"}},
		})
		withExt := cp.StartScheduler(t, SchedulerOptions{Binary: bins[2], Name: "kube-scheduler-extender", ConfigFile: extCfg, Verbosity: 1, ReadyTimeout: 3 * time.Minute})
		stock := cp.StartScheduler(t, SchedulerOptions{Binary: bins[2], Name: "kube-scheduler-stock", ConfigFile: stockCfg, Verbosity: 1, ReadyTimeout: 3 * time.Minute})
		n := cmp.Or(cfg.ExtenderPods, cfg.Pods)
		s.warmUp(ctx, t, n, warmRun{withExt, corev1.DefaultSchedulerName}, warmRun{stock, "stock"})
		for round := range cfg.Rounds {
			shapes := s.batchShapes(n)
			order := []warmRun{{withExt, corev1.DefaultSchedulerName}, {stock, "stock"}}
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, r := range order {
				row := s.measure(ctx, t, "extender", round, r.p, r.profile, shapes)
				rates["extender/"+r.profile] = append(rates["extender/"+r.profile], row.PodsPS)
			}
		}
		withExt.Stop()
		stock.Stop()
		ext.Stop()
	}
	t.Logf("telemetry refresher wrote %d node annotations", stopTel())

	s.rep.Median, s.rep.Ratios = map[string]float64{}, map[string]float64{}
	for k, v := range rates {
		s.rep.Median[k] = median(v)
		if !(s.rep.Median[k] > 0) || math.IsInf(s.rep.Median[k], 0) {
			t.Errorf("%s: median rate %v pods/s", k, s.rep.Median[k])
		}
	}
	s.rep.Ratios["edgepolicy/default"] = s.rep.Median["side/"+edgeSchedulerName] / s.rep.Median["side/"+tpDefaultProfile]
	s.rep.Paired = map[string]pairedRatio{"edgepolicy/default": pairRatio(rates["side/"+edgeSchedulerName], rates["side/"+tpDefaultProfile])}
	if cfg.Extender {
		s.rep.Ratios["extender/stock"] = s.rep.Median["extender/"+corev1.DefaultSchedulerName] / s.rep.Median["extender/stock"]
		s.rep.Paired["extender/stock"] = pairRatio(rates["extender/"+corev1.DefaultSchedulerName], rates["extender/stock"])
	}
	t.Log("\n" + s.table())
	if cfg.Out != "" {
		b, err := json.MarshalIndent(s.rep, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg.Out, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", cfg.Out)
	}
	t.Logf("whole run %s", time.Since(began).Round(time.Second))
}

// table formats the report: one line per batch, then medians, ratios and memory.
func (s *scaleRig) table() string {
	var b strings.Builder
	c := s.rep.Config
	fmt.Fprintf(&b, "scale harness: %d nodes, batches of %d pods (%d distinct shapes in the stream), %d rounds, client qps %d, telemetry every %s\n",
		c.Nodes, c.Pods, c.DistinctShapes, c.Rounds, c.QPS, c.Telemetry)
	fmt.Fprintf(&b, "%-8s %-17s %5s %9s %10s %10s %10s %10s %10s %10s %8s %7s\n", "phase", "profile", "round", "pods/s", "attempt ms", "Filter ms", "PreScore", "Score ms", "sched ms/p", "api ms/p", "RSS MiB", "hit")
	for _, r := range s.rep.Batches {
		hit := "-"
		if r.CacheHitRate >= 0 {
			hit = fmt.Sprintf("%.3f", r.CacheHitRate)
		}
		fmt.Fprintf(&b, "%-8s %-17s %5d %9.1f %10.3f %10.3f %10.3f %10.3f %10.2f %10.2f %8.0f %7s\n", r.Phase, r.Profile, r.Round, r.PodsPS, r.AttemptMs,
			r.ExtensionMs["Filter"], r.ExtensionMs["PreScore"], r.ExtensionMs["Score"], r.SchedCPUPerPodMs, r.APIServerCPUPerPo, r.RSSMiB, hit)
	}
	for _, k := range slices.Sorted(mapKeys(s.rep.Median)) {
		fmt.Fprintf(&b, "median %-26s %8.1f pods/s\n", k, s.rep.Median[k])
	}
	for _, k := range slices.Sorted(mapKeys(s.rep.Ratios)) {
		fmt.Fprintf(&b, "ratio  %-26s %8.3f\n", k, s.rep.Ratios[k])
	}
	for _, k := range slices.Sorted(mapKeys(s.rep.Paired)) {
		p := s.rep.Paired[k]
		fmt.Fprintf(&b, "paired %-26s %8.3f (se %.3f, %d rounds, higher in %d)\n", k, p.Ratio, p.SE, p.Rounds, p.Higher)
	}
	for _, k := range slices.Sorted(mapKeys(s.rep.MemoryMiB)) {
		fmt.Fprintf(&b, "memory %-26s %8.0f MiB\n", k, s.rep.MemoryMiB[k])
	}
	return b.String()
}

// pairedRatio is a ratio of two profiles' rates from rounds' pairs.
type pairedRatio struct {
	// Ratio is exp(mean over rounds of log(a/b)): the geometric mean of the
	// rounds' ratios.
	Ratio float64 `json:"ratio"`
	// SE is Ratio's standard error, Ratio × sd(log ratios)/sqrt(rounds)
	// (the delta method); 0 with one round.
	SE float64 `json:"se"`
	// Rounds is the number of pairs; Higher the rounds where a > b.
	Rounds int `json:"rounds"`
	Higher int `json:"higher"`
}

// pairRatio pairs a[i] with b[i] (round i of each profile); rounds
// without a positive rate on both sides are left out.
func pairRatio(a, b []float64) pairedRatio {
	var logs []float64
	var p pairedRatio
	for i := range min(len(a), len(b)) {
		if !(a[i] > 0 && b[i] > 0) {
			continue
		}
		logs = append(logs, math.Log(a[i]/b[i]))
		if a[i] > b[i] {
			p.Higher++
		}
	}
	p.Rounds = len(logs)
	if p.Rounds == 0 {
		return p
	}
	var mean float64
	for _, l := range logs {
		mean += l
	}
	mean /= float64(p.Rounds)
	p.Ratio = math.Exp(mean)
	if p.Rounds > 1 {
		var ss float64
		for _, l := range logs {
			ss += (l - mean) * (l - mean)
		}
		p.SE = p.Ratio * math.Sqrt(ss/float64(p.Rounds-1)/float64(p.Rounds))
	}
	return p
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

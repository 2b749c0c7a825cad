//go:build unix

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/openb"
)

// This file runs edge-agent processes (one per fake node, as a DaemonSet
// would run one per real node) against the real control plane: each
// writes a valid, fresh edgesched.io/telemetry annotation to its Node,
// serves /metrics and /healthz, stops on SIGTERM, and its annotation ages
// past the staleness bound when it is killed. All agents run on this one
// machine, so to give the nodes different loads each agent measures its
// own cgroup (--cgroup, as an agent in a container measures its
// container): the test creates one cgroup per node, each limited to 0.2
// CPU, and runs a CPU burner in one of them. With edge-scheduler started
// as in edgescheduler_test.go, pods then land according to the measured
// load: moving the burner to another node's cgroup moves the placements.

// AgentPkg is the edge-agent command.
const AgentPkg = "github.com/edgesched/edgesched/cmd/edge-agent"

const (
	agentNodes = 3
	// agentAnnotate is the agents' --annotate-interval (and window) and
	// agentStale their --telemetry-max-age: unchanged summaries are rewritten
	// every agentStale/2.
	agentAnnotate = 2 * time.Second
	agentStale    = 8 * time.Second
	// agentCgroupCPU is each node cgroup's CFS quota in CPUs: small, so
	// a burner saturates it even on a busy machine, and disturbs the
	// machine little.
	agentCgroupCPU = 0.2
)

// agentProc is one running edge-agent.
type agentProc struct {
	node    string
	metrics string // http://127.0.0.1:PORT
	p       *Process
}

// startAgent starts edge-agent for node with extra flags, on a free
// metrics port (retried when another process took the port first).
func startAgent(t *testing.T, bin, dir, kubeconfig, node string, extra ...string) *agentProc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		name := "edge-agent-" + node
		if attempt > 1 {
			name += "-" + strconv.Itoa(attempt)
		}
		args := append([]string{"--node-name", node, "--kubeconfig", kubeconfig, "--metrics-addr", addr,
			"--sample-interval", "1s", "--annotate-interval", agentAnnotate.String(), "--telemetry-max-age", agentStale.String(),
			"--log-level", "debug"}, extra...)
		p, err := StartProcess(t, dir, name, 0, bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		a := &agentProc{node: node, metrics: "http://" + addr, p: p}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = waitFor(ctx, p, name+" /healthz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, insecureHTTPClient(), a.metrics+"/healthz", ""), nil
		})
		cancel()
		if err == nil {
			return a
		}
		p.Stop()
		if !errors.Is(err, errAddrInUse) || attempt == 3 {
			t.Fatalf("e2e: %s did not start: %v", name, err)
		}
	}
}

// nodeTelemetry returns the node's decoded summary (ok false when the
// annotation is missing) and fails t when it is malformed.
func nodeTelemetry(ctx context.Context, t *testing.T, cp *ControlPlane, node string) (kubefmt.TelemetrySummary, bool) {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := n.Annotations[kubefmt.AnnotationTelemetry]
	if !ok {
		return kubefmt.TelemetrySummary{}, false
	}
	s, err := kubefmt.DecodeTelemetry(v)
	if err != nil {
		t.Fatalf("node %s: annotation %q does not decode: %v", node, v, err)
	}
	return s, true
}

// waitTelemetry polls the node's summary until cond holds.
func waitTelemetry(ctx context.Context, t *testing.T, cp *ControlPlane, node, what string, within time.Duration, cond func(kubefmt.TelemetrySummary) bool) kubefmt.TelemetrySummary {
	t.Helper()
	deadline := time.Now().Add(within)
	var last kubefmt.TelemetrySummary
	var seen bool
	for {
		s, ok := nodeTelemetry(ctx, t, cp, node)
		if ok && cond(s) {
			return s
		}
		last, seen = s, ok
		if time.Now().After(deadline) {
			t.Fatalf("node %s: no %s within %v (last summary present=%v: %+v)", node, what, within, seen, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nodeCgroups are per-node cgroups made for the test.
type nodeCgroups struct {
	base  string   // "/edgesched-e2e-XXXX"
	roots []string // hierarchy mount points holding base (v1: cpu, cpuacct, memory; v2: the unified root)
}

// path is node i's cgroup path as --cgroup takes it.
func (c *nodeCgroups) path(i int) string { return fmt.Sprintf("%s/node-%d", c.base, i) }

// makeNodeCgroups creates one cgroup per node limited to agentCgroupCPU,
// under a fresh parent, in the v1 cpu, cpuacct and memory hierarchies or
// the cgroup2 root; removed at cleanup (after the burner, registered
// later, has stopped). An error says why it cannot (not root, read-only
// cgroupfs, ...).
func makeNodeCgroups(t *testing.T, n int, seed uint64) (*nodeCgroups, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("creating cgroups needs root (euid %d)", os.Geteuid())
	}
	const fsRoot = "/sys/fs/cgroup"
	c := &nodeCgroups{base: fmt.Sprintf("/edgesched-e2e-%016x", rand.New(rand.NewPCG(seed, 0)).Uint64())}
	v2 := fileExists(filepath.Join(fsRoot, "cgroup.controllers"))
	if v2 {
		c.roots = []string{fsRoot}
	} else {
		for _, h := range []string{"cpu", "cpuacct", "memory"} {
			if _, err := os.Stat(filepath.Join(fsRoot, h, "cgroup.procs")); err != nil {
				return nil, fmt.Errorf("no cgroup v1 %s hierarchy at %s: %v", h, filepath.Join(fsRoot, h), err)
			}
			c.roots = append(c.roots, filepath.Join(fsRoot, h))
		}
	}
	t.Cleanup(func() {
		for _, r := range c.roots {
			for i := range n {
				os.Remove(filepath.Join(r, c.path(i)))
			}
			os.Remove(filepath.Join(r, c.base))
		}
	})
	write := func(path, value string) error {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("write %q to %s: %w", value, path, err)
		}
		return nil
	}
	quota := strconv.Itoa(int(agentCgroupCPU * 100000))
	for _, r := range c.roots {
		if err := os.Mkdir(filepath.Join(r, c.base), 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		if v2 {
			if err := write(filepath.Join(r, c.base, "cgroup.subtree_control"), "+cpu +memory"); err != nil {
				return nil, err
			}
		}
		for i := range n {
			dir := filepath.Join(r, c.path(i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				return nil, fmt.Errorf("create cgroup: %w", err)
			}
			switch {
			case v2:
				if err := write(filepath.Join(dir, "cpu.max"), quota+" 100000"); err != nil {
					return nil, err
				}
			case filepath.Base(r) == "cpu":
				if err := write(filepath.Join(dir, "cpu.cfs_quota_us"), quota); err != nil {
					return nil, err
				}
			}
		}
	}
	return c, nil
}

// move puts pid into node i's cgroup in every hierarchy.
func (c *nodeCgroups) move(pid, i int) error {
	for _, r := range c.roots {
		p := filepath.Join(r, c.path(i), "cgroup.procs")
		if err := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move pid %d to %s: %w", pid, p, err)
		}
	}
	return nil
}

// TestAgentEndToEnd runs three edge-agents against kine + kube-apiserver
// and edge-scheduler.
func TestAgentEndToEnd(t *testing.T) {
	began := time.Now()
	bins := Build(t, KinePkg, APIServerPkg, AgentPkg, "github.com/edgesched/edgesched/cmd/edge-scheduler")
	agentBin, schedBin := bins[2], bins[3]
	specs := make([]sim.NodeSpec, agentNodes)
	for i := range specs {
		specs[i] = sim.NodeSpec{Name: fmt.Sprintf("agent-node-%d", i), CPU: 32000, Memory: 128 << 10, Arch: sim.ArchAMD64}
	}
	// The model for edge-scheduler is quantized while the control plane starts.
	type artResult struct {
		a   *quant.Artifact
		err error
	}
	artCh := make(chan artResult, 1)
	go func() {
		// Calibrated on the heterogeneous openb nodes edgescheduler_test.go
		// uses (three equal nodes place too few of the trace's pods).
		all, err := openb.LoadNodes("openb:"+openb.AllNodes, nil)
		if err != nil {
			artCh <- artResult{nil, err}
			return
		}
		// the model that reads the agents' telemetry (issue 18)
		envs, err := calibrationEnvs(&sim.Cluster{Name: "calibration", Nodes: SelectNodes(all, edgeNodes)}, "edge-loaded")
		if err != nil {
			artCh <- artResult{nil, err}
			return
		}
		a, err := quantizeIn(envs, "edge-loaded", quant.Info{Version: 1, Created: time.Unix(1_800_000_000, 0)})
		artCh <- artResult{a, err}
	}()

	cp := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if _, err := RegisterNodes(ctx, cp.Client, specs, 0); err != nil {
		t.Fatal(err)
	}
	// An annotation and a label of someone else's: the agents' merge
	// patches must keep them.
	for _, s := range specs {
		patch := []byte(`{"metadata":{"annotations":{"example.com/owner":"ops"},"labels":{"example.com/rack":"r1"}}}`)
		if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("cgroup name seed %d", seed)
	cgroups, cgErr := makeNodeCgroups(t, agentNodes, seed)
	if cgErr != nil {
		t.Logf("agents measure the whole host (no per-node cgroups: %v); the placement subtest will skip", cgErr)
	}
	agents := make([]*agentProc, agentNodes)
	for i, s := range specs {
		var extra []string
		if i != 0 {
			extra = append(extra, "--no-ebpf") // agent 0 loads the eBPF probes when it can
		}
		if cgroups != nil {
			extra = append(extra, "--cgroup", cgroups.path(i))
		}
		agents[i] = startAgent(t, agentBin, cp.Dir, kubeconfig, s.Name, extra...)
	}
	t.Logf("%d agents up at %s", agentNodes, time.Since(began).Round(time.Millisecond))

	if !t.Run("FreshAnnotations", func(t *testing.T) {
		for _, a := range agents {
			s := waitTelemetry(ctx, t, cp, a.node, "fresh annotation", 30*time.Second, func(s kubefmt.TelemetrySummary) bool {
				return s.Fresh(time.Now(), agentStale)
			})
			if s.Window < time.Second || s.Window > agentAnnotate+time.Second || s.CPU < 0 || s.CPU > 1 || s.RetransPerS == nil {
				t.Fatalf("%s: summary %+v: want a window of about %v and retransmits", a.node, s, agentAnnotate)
			}
			if cgroups == nil && s.Mem <= 0 {
				t.Fatalf("%s: host memory in use %v", a.node, s.Mem)
			}
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Annotations["example.com/owner"] != "ops" || n.Labels["example.com/rack"] != "r1" {
				t.Fatalf("%s: the agent's patch lost other metadata: annotations %v labels %v", a.node, n.Annotations, n.Labels)
			}
			m, err := scrapeMetrics(ctx, a.metrics+"/metrics", "")
			if err != nil {
				t.Fatal(err)
			}
			if m.sum("edgesched_agent_annotation_writes_total", `result="ok"`) < 1 || m.sum("edgesched_agent_samples_total") < 2 ||
				m.sum("edgesched_agent_memory_total_bytes") <= 0 || m.sum("edgesched_agent_sample_duration_seconds_count") < 2 {
				t.Fatalf("%s: metrics: writes %v samples %v", a.node, m.sum("edgesched_agent_annotation_writes_total", `result="ok"`), m.sum("edgesched_agent_samples_total"))
			}
			if cgroups != nil && m.sum("edgesched_agent_cgroup_cpu_limit_cpus") != agentCgroupCPU {
				t.Fatalf("%s: cgroup CPU limit metric %v, want %v", a.node, m.sum("edgesched_agent_cgroup_cpu_limit_cpus"), agentCgroupCPU)
			}
			ebpf, proc := m.sum("edgesched_agent_telemetry_source", `source="ebpf"`), m.sum("edgesched_agent_telemetry_source", `source="proc"`)
			log := a.p.LogTail(64 << 10)
			switch {
			case a == agents[0] && ebpf == 1:
				s = waitTelemetry(ctx, t, cp, a.node, "run-queue p99", 15*time.Second, func(s kubefmt.TelemetrySummary) bool { return s.RunQueueP99Us != nil })
				t.Logf("%s: eBPF loaded: %+v, run-queue p99 %.1f µs", a.node, s, *s.RunQueueP99Us)
			case a == agents[0]:
				if proc != 1 || strings.Count(log, "eBPF telemetry unavailable") != 1 {
					t.Fatalf("%s: eBPF not loaded but no single warning saying why (source proc=%v):\n%s", a.node, proc, log)
				}
				t.Logf("%s: eBPF unavailable here, on /proc: %s", a.node, firstLine(log, "eBPF telemetry unavailable"))
			default:
				if proc != 1 || ebpf != 0 || !strings.Contains(log, "eBPF telemetry disabled") || s.RunQueueP99Us != nil {
					t.Fatalf("%s: --no-ebpf but source ebpf=%v proc=%v, p99 %v", a.node, ebpf, proc, s.RunQueueP99Us)
				}
			}
			t.Logf("%s: cpu %.3f mem %.4f load1 %.2f window %v, age %v", a.node, s.CPU, s.Mem, s.Load1, s.Window, time.Since(s.Time).Round(time.Millisecond))
		}
	}) {
		return
	}

	t.Run("PlacementFollowsMeasuredLoad", func(t *testing.T) {
		if cgroups == nil {
			t.Skipf("needs per-node cgroups to give the nodes different measured loads: %v", cgErr)
		}
		res := <-artCh
		if res.err != nil {
			t.Fatal(res.err)
		}
		placementFollowsLoad(ctx, t, cp, schedBin, res.a, cgroups, agents)
	})

	t.Run("KilledAgentGoesStale", func(t *testing.T) {
		dead, alive := agents[2], agents[0]
		before, _ := nodeTelemetry(ctx, t, cp, dead.node)
		if err := syscall.Kill(dead.p.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-dead.p.Done()
		killedAt := time.Now()
		// The survivors keep their summaries fresh (a rewrite at least every
		// agentStale/2); the dead agent's ages past agentStale.
		aliveBefore, _ := nodeTelemetry(ctx, t, cp, alive.node)
		waitTelemetry(ctx, t, cp, alive.node, "a newer summary", agentStale, func(s kubefmt.TelemetrySummary) bool { return s.Time.After(aliveBefore.Time) })
		for time.Since(killedAt) < agentStale+2*time.Second {
			time.Sleep(200 * time.Millisecond)
		}
		s, ok := nodeTelemetry(ctx, t, cp, dead.node)
		if !ok || s.Time.After(killedAt) {
			t.Fatalf("%s: summary written after its agent was killed: %+v -> %+v", dead.node, before, s)
		}
		if s.Fresh(time.Now(), agentStale) {
			t.Fatalf("%s: summary from %v still fresh %v after the kill", dead.node, s.Time, time.Since(killedAt))
		}
		if a, ok := nodeTelemetry(ctx, t, cp, alive.node); !ok || !a.Fresh(time.Now(), agentStale) {
			t.Fatalf("%s: the surviving agent's summary is stale: %+v", alive.node, a)
		}
		t.Logf("%s: summary %v old %v after SIGKILL (stale beyond %v); %s still fresh", dead.node, time.Since(s.Time).Round(time.Second),
			time.Since(killedAt).Round(time.Second), agentStale, alive.node)

		// SIGTERM: a graceful stop, exit status 0.
		term := agents[1]
		if err := term.p.Stop(); err != nil {
			t.Fatal(err)
		}
		if term.p.waitErr != nil || !strings.Contains(term.p.LogTail(8<<10), "edge-agent stopped") {
			t.Fatalf("%s after SIGTERM: exit %v, log tail:\n%s", term.node, term.p.waitErr, term.p.LogTail(4<<10))
		}
		if httpOK(ctx, insecureHTTPClient(), term.metrics+"/healthz", "") {
			t.Fatalf("%s: /healthz still answers after the agent stopped", term.node)
		}
	})
	t.Logf("whole test %s", time.Since(began).Round(time.Millisecond))
}

func firstLine(log, containing string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, containing) {
			return l
		}
	}
	return ""
}

// placementFollowsLoad starts edge-scheduler with the shipped
// configuration and the quantized "edge-loaded" model (the shipped model
// trained with the telemetry features, issue 18), puts a CPU burner in node 0's cgroup,
// schedules pods one at a time (each deleted once bound, so every pod
// sees three empty, identical nodes that differ only in what their agents
// measure), then moves the burner to node 1's cgroup and does it again.
// Checked: no pod of either phase lands on the hot node, and each pod's
// explanation credits the choice to the "load" feature group alone (the
// measured load and telemetry; the nodes being otherwise equal, its
// attribution is the whole margin over the mean candidate).
func placementFollowsLoad(ctx context.Context, t *testing.T, cp *ControlPlane, schedBin string, art *quant.Artifact, cg *nodeCgroups, agents []*agentProc) {
	dir := t.TempDir()
	signer := e2eSigner(t, 1)
	keyDir := trustedKeyDir(t, dir, signer)
	modelPath := filepath.Join(dir, "model", "policy.esa")
	writeAtomic(t, modelPath, signedWithVersion(t, art, signer, 1))
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := deploySchedulerConfig(t, dir, kubeconfig, modelPath, keyDir)
	sched := cp.StartScheduler(t, SchedulerOptions{Binary: schedBin, ConfigFile: cfgPath})
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := scrapeMetrics(ctx, sched.URL+"/metrics", cp.Token)
		if err == nil && m.sum("edgesched_plugin_model_version") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("edge-scheduler did not load the model in 60 s (last scrape error %v)", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	const ns = "agent-placement"
	if err := CreateNamespace(ctx, cp.Client, ns); err != nil {
		t.Fatal(err)
	}

	burner, err := StartProcess(t, dir, "cpu-burner", time.Second, "/bin/sh", "-c", "while :; do :; done")
	if err != nil {
		t.Fatal(err)
	}
	const podsPerPhase = 3
	for phase, hot := range []int{0, 1} {
		if err := cg.move(burner.PID(), hot); err != nil {
			t.Fatal(err)
		}
		// The hot node reports its cgroup near its 0.2-CPU limit, the others near idle.
		for i, a := range agents {
			cond, what := func(s kubefmt.TelemetrySummary) bool { return s.CPU <= 0.2 && s.Fresh(time.Now(), agentStale) }, "an idle summary"
			if i == hot {
				cond, what = func(s kubefmt.TelemetrySummary) bool { return s.CPU >= 0.7 && s.Fresh(time.Now(), agentStale) }, "a busy summary"
			}
			s := waitTelemetry(ctx, t, cp, a.node, what, 30*time.Second, cond)
			t.Logf("phase %d: %s reports cpu %.3f", phase, a.node, s.CPU)
		}
		var placed []string
		onHot := 0
		for k := range podsPerPhase {
			name := fmt.Sprintf("phase%d-pod%d", phase, k)
			if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, edgePod(name, edgeShape{cpu: "100m", mem: "128Mi"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := waitPodBound(ctx, t, cp, ns, name)
			placed = append(placed, p.Spec.NodeName)
			if p.Spec.NodeName == agents[hot].node {
				onHot++
			}
			e, err := edgeplugin.ParseExplanation(p.Annotations[edgeplugin.AnnotationExplanation])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if e.Node != p.Spec.NodeName || e.Candidates != agentNodes {
				t.Fatalf("%s: explanation for node %s among %d candidates; bound to %s among %d", name, e.Node, e.Candidates, p.Spec.NodeName, agentNodes)
			}
			var load float64
			for _, g := range e.Groups {
				switch {
				case g.Group == "load":
					load = g.Attribution
				case math.Abs(g.Attribution) > 1e-3:
					t.Fatalf("%s: group %s contributes %v on equal nodes: %+v", name, g.Group, g.Attribution, e.Groups)
				}
			}
			// The baseline is the score of the mean candidate's features,
			// not the mean score: a network whose response to load is not
			// monotone can prefer the hot node while scoring it below the
			// mean candidate, so the sign of the margin is not checked;
			// that load accounts for all of it is.
			if load == 0 || math.Abs(e.Score-e.Baseline-load) > 1e-2+1e-3*math.Abs(load) {
				t.Fatalf("%s: load attribution %v, score %v over baseline %v: the choice is not the measured load's (groups %+v, rest %v)",
					name, load, e.Score, e.Baseline, e.Groups, e.Rest)
			}
			t.Logf("phase %d: %s -> %s, score %.4f over the mean candidate's %.4f, all of it from the load group (%.4f)", phase, name, e.Node, e.Score, e.Baseline, load)
			zero := int64(0)
			if err := cp.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
			waitNoPods(ctx, t, cp, ns)
		}
		t.Logf("phase %d: burner on %s; pods placed on %v", phase, agents[hot].node, placed)
		if onHot != 0 {
			t.Fatalf("phase %d: %d of %d pods on the node %s reporting high CPU (%v): the edge model must prefer the idle nodes", phase, onHot, podsPerPhase, agents[hot].node, placed)
		}
	}
	t.Logf("placements moved with the measured load: both phases away from the node reporting high CPU")
	m, err := scrapeMetrics(ctx, sched.URL+"/metrics", cp.Token)
	if err != nil {
		t.Fatal(err)
	}
	if f := m.sum("edgesched_plugin_telemetry_fallbacks_total"); f != 0 {
		t.Fatalf("the scheduler fell back from telemetry %v times: %s", f, m.series("edgesched_plugin_telemetry_fallbacks_total"))
	}
}

func waitPodBound(ctx context.Context, t *testing.T, cp *ControlPlane, ns, name string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s not bound within 30 s (conditions %v)", ns, name, p.Status.Conditions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitNoPods(ctx context.Context, t *testing.T, cp *ControlPlane, ns string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods left in %s after 30 s", len(l.Items), ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// AgentOverheadEnv names the variable that enables TestAgentOverhead: a
// duration to measure for (e.g. 60s).
const AgentOverheadEnv = "EDGESCHED_AGENT_OVERHEAD"

// procTimes reads a process's CPU time (utime + stime) from
// /proc/PID/stat, in clock ticks, and its resident and peak resident set
// from /proc/PID/status, in kB.
func procTimes(pid int) (ticks uint64, rssKB, hwmKB uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	// Fields after the command (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64) // field 14 (utime)
	st, err2 := strconv.ParseUint(f[12], 10, 64) // field 15 (stime)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, 0, err
	}
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(s), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rssKB = n
		case "VmHWM":
			hwmKB = n
		}
	}
	return ut + st, rssKB, hwmKB, nil
}

// TestAgentOverhead measures one edge-agent at 1 Hz sampling with the
// eBPF probes (when they load) and annotation writes to the real control
// plane, its /metrics scraped every 15 s like Prometheus would: CPU (% of
// one core, from /proc/PID/stat over the period) and resident memory. It
// reports figures and asserts only that the agent stayed healthy (goals:
// <= 2 % of a core, <= 40 MB RSS; docs/agent.md). Opt-in, it takes a
// minute: EDGESCHED_AGENT_OVERHEAD=60s.
func TestAgentOverhead(t *testing.T) {
	period, err := time.ParseDuration(os.Getenv(AgentOverheadEnv))
	if err != nil || period <= 0 {
		t.Skipf("set %s to a duration (e.g. 60s) to measure the agent's overhead (got %q)", AgentOverheadEnv, os.Getenv(AgentOverheadEnv))
	}
	bins := Build(t, KinePkg, APIServerPkg, AgentPkg)
	cp := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), period+2*time.Minute)
	defer cancel()
	const node = "overhead-node"
	if _, err := RegisterNodes(ctx, cp.Client, []sim.NodeSpec{{Name: node, CPU: 32000, Memory: 128 << 10, Arch: sim.ArchAMD64}}, 0); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := StartProcess(t, cp.Dir, "edge-agent", 0, bins[2], "--node-name", node, "--kubeconfig", kubeconfig, "--metrics-addr", addr)
	if err != nil {
		t.Fatal(err)
	}
	waitTelemetry(ctx, t, cp, node, "a first annotation", 30*time.Second, func(kubefmt.TelemetrySummary) bool { return true })
	time.Sleep(5 * time.Second) // warm-up: probes loaded, first writes done
	t0, _, _, err := procTimes(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	scrapes := 0
	for time.Since(start) < period {
		if _, err := scrapeMetrics(ctx, "http://"+addr+"/metrics", ""); err != nil {
			t.Fatal(err)
		}
		scrapes++
		time.Sleep(min(15*time.Second, period-time.Since(start)))
	}
	t1, rss, hwm, err := procTimes(p.PID())
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	m, err := scrapeMetrics(ctx, "http://"+addr+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	const hz = 100 // USER_HZ
	cpuPct := float64(t1-t0) / hz / elapsed.Seconds() * 100
	source := "proc"
	if m.sum("edgesched_agent_telemetry_source", `source="ebpf"`) == 1 {
		source = "ebpf"
	}
	st, _ := os.Stat(bins[2])
	t.Logf("edge-agent over %v at 1 Hz (source %s, %v annotation writes, %d scrapes): CPU %.2f%% of one core (%d ticks), RSS %.1f MiB (peak %.1f MiB), mean sample %.0f µs; binary %s (%.1f MiB)",
		elapsed.Round(time.Second), source, m.sum("edgesched_agent_annotation_writes_total", `result="ok"`), scrapes, cpuPct, t1-t0,
		float64(rss)/1024, float64(hwm)/1024,
		m.sum("edgesched_agent_sample_duration_seconds_sum")/m.sum("edgesched_agent_sample_duration_seconds_count")*1e6,
		bins[2], float64(st.Size())/(1<<20))
	if m.sum("edgesched_agent_sample_errors_total") != 0 || !httpOK(ctx, insecureHTTPClient(), "http://"+addr+"/healthz", "") {
		t.Fatalf("the agent was not healthy during the measurement: %s", m.series("edgesched_agent_sample_errors_total"))
	}
}

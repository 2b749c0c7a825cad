package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
)

// chainServices is the observed chain: each calls the next.
var chainServices = []string{"checkout", "payment", "ledger"}

// chainPort is the port every chain pod serves on (each pod has an
// address of its own).
const chainPort = 7070

// observedChain runs the whole dependency chain of issue 19 on real
// parts, the way a site runs it (the edge-sage model installed):
//
//   - pod processes (this test binary, re-executed: chainpod_test.go)
//     serve and call each other over TCP from their pods' IPs:
//     checkout -> payment -> ledger;
//   - edge-agent (the binary) runs as site leader on their node with
//     eBPF: its flow collector sees the connections, its trace recorder
//     maps the addresses to pods and services and publishes the node's
//     flows, and the leader turns the trace into the service graph and
//     its GraphSAGE embeddings and partners, written to the dependency
//     ConfigMap the scheduler reads (--dependencies-embeddings);
//   - edge-scheduler places new checkout pods on two boards in two
//     zones: without a graph most go to the zone the policy prefers;
//     ledger runs in the other zone (its pod is the chain's last,
//     checkout's partner two calls away), and once the observed graph is
//     in use most new checkout pods must follow it there. No one-hop
//     feature sees ledger (checkout and payment run on the agent's own
//     node, in a third zone, which the new pods cannot use).
//
// It needs root (the agent loads eBPF programs); without it, or when
// the kernel refuses the programs, it skips saying why.
func (r *edgeRun) observedChain(ctx context.Context, ns string, args edgeplugin.Args, agentBin string) {
	t := r.t
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("the observed chain needs root: the agent loads eBPF programs to see the pods' connections (euid %d)", os.Geteuid())
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmNS, cmName := dependenciesConfigMap(t, args)
	// The agent's node: a zone of its own, tainted so that nothing but
	// the chain's own pods (bound to it) runs there.
	const hostTaint = "edgesched.io/e2e-chain"
	registered, err := RegisterNodes(ctx, r.cp.Client, []sim.NodeSpec{{Name: "chain-host", CPU: 8000, Memory: 16384, Arch: sim.ArchAMD64,
		Zone: "edge-obs", Taints: []sim.Taint{{Key: hostTaint, Value: "true", Effect: sim.EffectNoSchedule}}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	host := registered[0]
	r.nodes = append(r.nodes, *host)
	// The pods' addresses: a loopback block drawn per run, so that two
	// runs on one machine do not serve on the same addresses.
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0x636861696e))
	block := fmt.Sprintf("127.%d.%d.", 1+rng.IntN(250), 1+rng.IntN(250))
	t.Logf("chain pods on %s0/24 (seed %d)", block, seed)
	addr := func(i int) string { return fmt.Sprintf("%s%d:%d", block, 10+i, chainPort) }

	var agent *agentProc
	publish := func(lastPod, _ string) {
		pods := r.cp.Client.CoreV1().Pods(ns)
		running := func(name, ip string) {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
			if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("pod %s running at %s: %v", name, ip, err)
			}
		}
		// checkout and payment run on the agent's node; ledger is the
		// pod followDependency bound to a board
		names := []string{"obs-checkout", "obs-payment", lastPod}
		for i, svc := range chainServices[:2] {
			p := edgePod(names[i], edgeShape{cpu: "100m", mem: "128Mi"})
			p.Labels = map[string]string{kubefmt.LabelService: svc}
			p.Spec.NodeName = host.Name
			p.Spec.Tolerations = []corev1.Toleration{{Key: hostTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s: %v", p.Name, err)
			}
		}
		for i, name := range names {
			running(name, strings.Split(addr(i), ":")[0])
		}

		if err := CreateNamespace(ctx, r.cp.Client, siteNamespace); err != nil {
			t.Fatal(err)
		}
		srv := fltest.StartNATS(t)
		dir := t.TempDir()
		keyDir := trustedKeyDir(t, filepath.Join(dir, "coordinator"), e2eSigner(t, 70))
		siteKeyFile, _, err := quant.WriteKeyPair(dir, "chain", e2eSigner(t, 71))
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig, err := r.cp.Kubeconfig()
		if err != nil {
			t.Fatal(err)
		}
		// No coordinator answers on this NATS server: the site's
		// federated learning waits, which the chain does not need.
		agent = startAgent(t, agentBin, r.cp.Dir, kubeconfig, host.Name, "--data", filepath.Join(dir, "data"),
			"--site", "chain", "--namespace", siteNamespace, "--server", srv.ClientURL(), "--site-key", siteKeyFile,
			"--model-keys", keyDir, "--lease-duration", "4s", "--dependencies-configmap", cmNS+"/"+cmName,
			"--dependencies-interval", "1s", "--dependencies-embeddings")
		var source string
		siteEventually(t, 30*time.Second, "the agent's telemetry source", func() (bool, string) {
			m, err := scrapeMetrics(ctx, agent.metrics+"/metrics", "")
			if err != nil {
				return false, err.Error()
			}
			switch {
			case m.sum("edgesched_agent_telemetry_source", `source="ebpf"`) == 1:
				source = "ebpf"
			case m.sum("edgesched_agent_telemetry_source", `source="proc"`) == 1:
				source = "proc"
			}
			return source != "", m.series("edgesched_agent_telemetry_source")
		})
		if source != "ebpf" {
			t.Skipf("the kernel did not take the agent's eBPF programs, so no flows are seen: %s", firstLine(agent.p.LogTail(64<<10), "eBPF telemetry unavailable"))
		}

		for i := range chainServices {
			calls := ""
			if i+1 < len(chainServices) {
				calls = addr(i + 1)
			}
			if _, err := StartProcess(t, r.cp.Dir, "chain-"+chainServices[i], 0, self, chainPodCommand,
				"--listen", addr(i), "--calls", calls, "--rate", "20", "--for", "5m"); err != nil {
				t.Fatal(err)
			}
		}
		// The recorder publishes the node's flows every 10 s and rates
		// need two snapshots; the leader then writes the graph within
		// its 1 s interval.
		want := []kubefmt.DependencyEdge{{From: "checkout", To: "payment"}, {From: "payment", To: "ledger"}}
		siteEventually(t, 90*time.Second, "the leader's graph of the observed chain, with embeddings", func() (bool, string) {
			cm, err := r.cp.Client.CoreV1().ConfigMaps(cmNS).Get(ctx, cmName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			g, err := kubefmt.DecodeDependencyGraph([]byte(cm.Data[kubefmt.DependenciesConfigMapKey]))
			if err != nil {
				return false, err.Error()
			}
			var got []kubefmt.DependencyEdge
			for _, e := range g.Edges {
				if e.CallsPerSecond <= 0 {
					return false, fmt.Sprintf("edge %+v", e)
				}
				got = append(got, kubefmt.DependencyEdge{From: e.From, To: e.To})
			}
			if !slices.Equal(got, want) {
				return false, fmt.Sprintf("edges %+v", g.Edges)
			}
			emb, err := kubefmt.DecodeEmbeddings([]byte(cm.Data[kubefmt.EmbeddingsConfigMapKey]))
			if err != nil {
				return false, "embeddings: " + err.Error()
			}
			if emb.Encoder != policy.AffinityEncoder || !emb.Updated.Equal(g.Updated) {
				return false, fmt.Sprintf("embeddings of encoder %s at %v, graph at %v", emb.Encoder, emb.Updated, g.Updated)
			}
			for _, s := range emb.Services {
				if s.Name != "checkout" {
					continue
				}
				for _, p := range s.Partners {
					if p.Service == "ledger" {
						t.Logf("observed graph %+v; checkout's partners %+v", g.Edges, s.Partners)
						return true, ""
					}
				}
				return false, fmt.Sprintf("checkout's partners %+v", s.Partners)
			}
			return false, "no embedding of checkout"
		})
		r.waitMetric(ctx, "the observed graph's partners in use", func(m metrics) bool {
			return m.sum("edgesched_plugin_dependency_partners") > 0
		})
	}
	r.followDependency(ctx, ns, args, "checkout", "ledger", publish, len(chainServices)-1)
	// the leader would write the graph again: it stops first
	if err := agent.p.Stop(); err != nil {
		t.Logf("stop the agent: %v", err)
	}
	r.clearDependencies(ctx, cmNS, cmName)
}

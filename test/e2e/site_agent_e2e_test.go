package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgesched/edgesched/agent/site"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
)

// siteAgentProcess runs edge-agent itself (the binary, as released) with
// --site against the real apiserver, an embedded NATS server and the
// real coordinator: every site flag the chart passes is parsed and
// validated, the agent takes the site Lease, installs the coordinator's
// model into the scheduler's ConfigMap, publishes the dependency graph
// with embeddings of the GraphSAGE weights that model carries (signed by
// the coordinator with it), exports its leader metric, and on SIGTERM stops with status 0 and
// releases the Lease. (The other site tests run the site components
// in-process; a missing default once kept the binary from starting
// with --site at all.)
func siteAgentProcess(t *testing.T, cp *ControlPlane) {
	const siteID, node = "proc-site", "proc-node"
	bin := Build(t, AgentPkg)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	srv := fltest.StartNATS(t)
	dir := t.TempDir()
	coordKey, siteKey := e2eSigner(t, 60), e2eSigner(t, 61)
	keyDir := trustedKeyDir(t, filepath.Join(dir, "coordinator"), coordKey)
	siteKeyFile, _, err := quant.WriteKeyPair(dir, siteID, siteKey)
	if err != nil {
		t.Fatal(err)
	}
	reg := &federated.Registry{}
	if err := reg.Add(siteID, siteKey.Public()); err != nil {
		t.Fatal(err)
	}
	cfg := fltest.CoordinatorConfig(t.TempDir(), reg, coordKey)
	cfg.Calibrate = fltest.NormalRows(200, 7)
	// the model carries GraphSAGE weights of its own (as after a round
	// that trained them): the leader must embed with those
	model := fltest.SmallModel(t, 1)
	model.Sage = policy.DefaultSage()
	model.Sage.Decoder[0] += 0.5
	ownID := model.Sage.ID()
	fltest.RunCoordinator(t, srv.ClientURL(), cfg, model)

	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, NodeObject(sim.NodeSpec{Name: node, CPU: 8000, Memory: 16384}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, bin, cp.Dir, kubeconfig, node, "--no-ebpf", "--data", filepath.Join(dir, "data"),
		"--site", siteID, "--namespace", siteNamespace, "--server", srv.ClientURL(), "--site-key", siteKeyFile,
		"--model-keys", keyDir, "--lease-duration", "4s", "--dependencies-interval", "1s", "--dependencies-embeddings")

	cms := cp.Client.CoreV1().ConfigMaps(siteNamespace)
	holder := func() string {
		l, err := cp.Client.CoordinationV1().Leases(siteNamespace).Get(ctx, site.LeaseName(siteID), metav1.GetOptions{})
		if err != nil {
			return "(error: " + err.Error() + ")"
		}
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	siteEventually(t, 30*time.Second, "the agent to lead its site", func() (bool, string) {
		return site.HolderNode(holder()) == node, "holder " + holder()
	})
	siteEventually(t, 60*time.Second, "the coordinator's model in the scheduler's ConfigMap", func() (bool, string) {
		cm, err := cms.Get(ctx, "edgesched-model", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		raw := cm.BinaryData[kubefmt.DefaultModelConfigMapKey]
		if len(raw) == 0 {
			return false, "no model key"
		}
		keys := fltest.Keyring(t, coordKey)
		art, err := quant.Decode(raw, quant.DecodeOptions{Keys: keys})
		if err != nil {
			return false, err.Error()
		}
		if art.Header.DType != quant.Int8 {
			return false, fmt.Sprintf("dtype %s", art.Header.DType)
		}
		if art.AffinityEncoder() != ownID {
			t.Fatalf("the installed int8 model's GraphSAGE weights are %s, the coordinator's model carries %s", art.AffinityEncoder(), ownID)
		}
		t.Logf("model version %d (%s) installed by %s", art.Header.Version, art.Header.ModelID[:12], cm.Annotations)
		return true, ""
	})
	siteEventually(t, 30*time.Second, "the dependency graph ConfigMap", func() (bool, string) {
		cm, err := cms.Get(ctx, kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		g, err := kubefmt.DecodeDependencyGraph([]byte(cm.Data[kubefmt.DependenciesConfigMapKey]))
		if err != nil {
			return false, err.Error()
		}
		// written by this agent for this site
		if cm.Labels["edgesched.io/site"] != siteID || cm.Annotations["edgesched.io/agent"] != node {
			return false, fmt.Sprintf("labels %v, annotations %v", cm.Labels, cm.Annotations)
		}
		if g.Version != kubefmt.DependencyGraphVersion {
			return false, fmt.Sprintf("graph version %d", g.Version)
		}
		// the leader embeds with the installed model's weights (it may
		// have written the shipped pair's before the model arrived)
		emb, err := kubefmt.DecodeEmbeddings([]byte(cm.Data[kubefmt.EmbeddingsConfigMapKey]))
		if err != nil {
			return false, "embeddings: " + err.Error()
		}
		return emb.Encoder == ownID && emb.Version == kubefmt.EmbeddingsVersion, fmt.Sprintf("%d edges, embeddings of %s version %d (want %s)", len(g.Edges), emb.Encoder, emb.Version, ownID)
	})
	m, err := scrapeMetrics(ctx, a.metrics+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	if v := m.sum("edgesched_site_is_leader"); v != 1 {
		t.Fatalf("edgesched_site_is_leader %v, want 1:\n%s", v, m.series("edgesched_site_is_leader"))
	}
	if err := a.p.Stop(); err != nil {
		t.Fatal(err)
	}
	if exited, err := a.p.Exited(); !exited || err != nil {
		t.Fatalf("edge-agent after SIGTERM: exited %v, %v\n%s", exited, err, a.p.LogTail(8<<10))
	}
	if log := a.p.LogTail(64 << 10); !strings.Contains(log, "edge-agent stopped") {
		t.Fatalf("no clean stop in the log:\n%s", log)
	}
	if h := holder(); h != "" {
		t.Fatalf("Lease held by %q after a graceful stop, want it released", h)
	}
}

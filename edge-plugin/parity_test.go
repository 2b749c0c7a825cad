package edgeplugin

import (
	"context"
	"fmt"
	"slices"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// TestParityWithSimulator replays a pod sequence on a small openb cluster
// in the simulator with int8net.Factory (ties to the lowest node index) and
// through the plugin's extension points, binding each pod where the
// simulator bound it, and checks that the plugin picks the same node
// (highest normalised score, first on ties) and the same GPU devices.
func TestParityWithSimulator(t *testing.T) {
	cl, err := openbCluster(40)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := openb.LoadPods("openb:default", nil)
	if err != nil {
		t.Fatal(err)
	}
	var pods []sim.PodSpec
	var share, whole, cpu int
	for i, ps := range pl.Pods[:120] {
		ps.Name = fmt.Sprintf("p%03d", i)
		ps.Create, ps.Delete = int64(i), sim.NoDeletion
		ps.Service, ps.Arch, ps.NodeSelector, ps.Tolerations = "", sim.ArchAny, nil, nil
		switch {
		case ps.GPUs == 0:
			cpu++
		case ps.GPUMilli < sim.MilliGPU:
			share++
		default:
			whole++
		}
		pods = append(pods, ps)
	}
	t.Logf("pods: %d share-GPU, %d whole-GPU, %d CPU-only", share, whole, cpu)
	env, err := sim.NewEnv(cl, &sim.Workload{Name: "parity", Pods: pods}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type bind struct {
		pod  string
		node int
		gpus []int
	}
	var binds []bind
	rc := engine.DefaultRunConfig(engine.Replay)
	rc.TieBreak = engine.TieFirst
	rc.OnBind = func(st *sim.State, p *sim.Pod, node int, gpus []int) {
		binds = append(binds, bind{env.Spec(p).Name, node, slices.Clone(gpus)})
	}
	if _, err := engine.Run(context.Background(), env, int8net.Factory("int8", testNet(t)), rc); err != nil {
		t.Fatal(err)
	}
	if len(binds) < 80 {
		t.Fatalf("only %d pods bound in the simulator", len(binds))
	}

	infos := make([]*framework.NodeInfo, len(cl.Nodes))
	lister := &fakeLister{}
	for i, n := range cl.Nodes {
		infos[i] = nodeInfo(k8sNode(n))
		lister.Nodes = append(lister.Nodes, infos[i])
	}
	p := newTestPlugin(t, &fakeHandle{Lister: lister}, env.Target)
	byName := map[string]sim.PodSpec{}
	for _, ps := range pods {
		byName[ps.Name] = ps
	}
	ctx := context.Background()
	nontrivial := 0 // decisions where the model's pick is not the first feasible node
	for k, b := range binds {
		pod := k8sPod(byName[b.pod])
		scores, cs := runCycle(t, p, pod, lister.Nodes)
		if len(scores) == 0 {
			t.Fatalf("decision %d (%s): no feasible node, simulator chose %s", k, b.pod, cl.Nodes[b.node].Name)
		}
		best := 0
		for i, s := range scores {
			if s.Score > scores[best].Score {
				best = i
			}
		}
		if want := cl.Nodes[b.node].Name; scores[best].Name != want {
			t.Fatalf("decision %d (%s): plugin chose %s (%d), simulator %s; scores %v", k, b.pod, scores[best].Name, scores[best].Score, want, scores)
		}
		if best > 0 {
			nontrivial++
		}
		if st := p.Reserve(ctx, cs, pod, scores[best].Name); !st.IsSuccess() {
			t.Fatalf("decision %d: Reserve: %v", k, st)
		}
		if len(b.gpus) > 0 {
			dev, ok := p.core.Reserved(pod.UID, scores[best].Name)
			if !ok || !slices.Equal(dev, b.gpus) {
				t.Fatalf("decision %d (%s): devices %v, simulator %v", k, b.pod, dev, b.gpus)
			}
			pod.Annotations[AnnotationGPUDevices] = kubefmt.FormatDevices(dev) // what Bind records
		}
		infos[b.node].AddPod(pod)
	}
	t.Logf("%d decisions agree (%d where the pick was not the first feasible node)", len(binds), nontrivial)
	if nontrivial < len(binds)/4 {
		t.Fatalf("only %d of %d decisions were non-trivial: the comparison proves little", nontrivial, len(binds))
	}
	var _ fwk.NodeInfo = infos[0]
}

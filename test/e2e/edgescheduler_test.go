//go:build unix

package e2e

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
	"github.com/edgesched/edgesched/sim/scenario"
)

// This file runs edge-scheduler (kube-scheduler with EdgePolicy) against
// the real control plane and checks it against the simulator's int8
// policy: bindings fit, GPU devices are recorded and consistent, each
// choice is one the simulator would make on the same state, a newer
// signed model is hot-swapped in, and a model signed by an untrusted key
// is refused while scheduling goes on with the previous one.

const (
	edgeSchedulerName = "edgesched"
	edgeTarget        = "openb:default"
	edgeThreshold     = 0.95
	edgeNodes         = 32
)

// edgeShape is a test pod for edge-scheduler.
type edgeShape struct {
	cpu, mem  string
	gpus      int64  // nvidia.com/gpu (whole devices)
	milli     int64  // edgesched.io/gpu-milli request (== limit)
	annoMilli string // edgesched.io/gpu-milli annotation (a share without the extended resource)
	models    string // edgesched.io/gpu-models annotation
	qos       string // edgesched.io/qos annotation
	usage     string // edgesched.io/cpu-usage annotation
}

// edgeShapes cycles through CPU pods, GPU shares (extended resource and
// annotation) and whole GPUs, some restricted to GPU models. Whole-device
// pods are rare enough that any placement of the shares leaves room for
// them (75 devices for at most ~45 shares and ~25 whole devices).
var edgeShapes = []edgeShape{
	{cpu: "500m", mem: "1Gi"},
	{cpu: "1", mem: "2Gi", milli: 250},
	{cpu: "4", mem: "16Gi", qos: "LS"},
	{cpu: "2", mem: "4Gi", milli: 500, models: "V100M16,V100M32"},
	{cpu: "8", mem: "32Gi", usage: "0.9"},
	{cpu: "4", mem: "16Gi", gpus: 1, milli: 1000},
	{cpu: "1", mem: "2Gi", annoMilli: "100"},
	{cpu: "2", mem: "4Gi"},
	{cpu: "1", mem: "4Gi", milli: 750, qos: "BE"},
	{cpu: "16", mem: "64Gi"},
	{cpu: "8", mem: "32Gi", gpus: 2, models: "T4,V100M32,G2,G3"},
	{cpu: "2", mem: "8Gi", milli: 300, models: "P100,T4,A10,V100M16,V100M32"},
}

func edgePod(name string, s edgeShape) *corev1.Pod {
	req := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(s.cpu),
		corev1.ResourceMemory: resource.MustParse(s.mem),
	}
	lim := corev1.ResourceList{}
	if s.gpus > 0 {
		req[edgeplugin.ResourceGPU] = *resource.NewQuantity(s.gpus, resource.DecimalSI)
		lim[edgeplugin.ResourceGPU] = *resource.NewQuantity(s.gpus, resource.DecimalSI)
	}
	if s.milli > 0 {
		req[edgeplugin.ResourceGPUMilli] = *resource.NewQuantity(s.milli, resource.DecimalSI)
		lim[edgeplugin.ResourceGPUMilli] = *resource.NewQuantity(s.milli, resource.DecimalSI)
	}
	ann := map[string]string{}
	for k, v := range map[string]string{
		edgeplugin.AnnotationGPUMilli:  s.annoMilli,
		edgeplugin.AnnotationGPUModels: s.models,
		edgeplugin.AnnotationQoS:       s.qos,
		edgeplugin.AnnotationCPUUsage:  s.usage,
	} {
		if v != "" {
			ann[k] = v
		}
	}
	no := false
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "edge-e2e"}, Annotations: ann},
		Spec: corev1.PodSpec{
			SchedulerName:                 edgeSchedulerName,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
			}},
		},
	}
}

// edgeArtifacts are the models the test signs: v1 (the shipped "default"
// model), v2 (the shipped "edge" model) and sage (the shipped "edge-sage"
// model, signed as version 4), quantized with calibration rows from a
// deterministic openb run (and, for the edge models, from the retail
// fleet too: see quantizeShipped).
type edgeArtifacts struct {
	v1, v2, sage *quant.Artifact
}

func quantizeShipped(cl *sim.Cluster) (*edgeArtifacts, error) {
	var out [3]*quant.Artifact
	for i, name := range []string{"default", "edge", "edge-sage"} {
		envs, err := calibrationEnvs(cl, name)
		if err != nil {
			return nil, err
		}
		if out[i], err = quantizeIn(envs, name, quant.Info{Version: uint64(i + 1), Created: time.Unix(1_800_000_000+int64(i), 0)}); err != nil {
			return nil, err
		}
	}
	return &edgeArtifacts{v1: out[0], v2: out[1], sage: out[2]}, nil
}

// calibrationEnvs are where the calibration rows of model name come from:
// calibrationEnv, and for the edge models also the retail fleet, whose
// services have dependencies. openb has none, and an int8 input scale
// calibrated where a feature is always 0 clamps it near 0: the edge
// model's co-location and RTT features would be lost.
func calibrationEnvs(cl *sim.Cluster, name string) ([]*sim.Env, error) {
	env, err := calibrationEnv(cl)
	if err != nil || !strings.HasPrefix(name, "edge") {
		return []*sim.Env{env}, err
	}
	l, err := scenario.Load("builtin:retail-fleet")
	if err != nil {
		return nil, err
	}
	deps, err := sage.NewEnv(l.Cluster, l.Workload)
	if err != nil {
		return nil, err
	}
	return []*sim.Env{env, deps}, nil
}

// calibrationEnv is where calibration rows are collected: the first 300
// pods of the target trace on cl.
func calibrationEnv(cl *sim.Cluster) (*sim.Env, error) {
	pl, err := openb.LoadPods(edgeTarget, nil)
	if err != nil {
		return nil, err
	}
	return sim.NewEnv(cl, &sim.Workload{Name: "calibration", Pods: pl.Pods[:min(300, len(pl.Pods))], Untimed: !pl.Timed}, sim.EnvOptions{})
}

// quantizeIn quantizes the shipped model name (models.Load) with 5000
// calibration rows from a deterministic (seed 9001) run in each of envs:
// a replay where the workload has times (a scenario), inflate otherwise.
func quantizeIn(envs []*sim.Env, name string, info quant.Info) (*quant.Artifact, error) {
	m, err := models.Load(name)
	if err != nil {
		return nil, err
	}
	var rows []float32
	for _, env := range envs {
		rc := engine.DefaultRunConfig(engine.Inflate)
		if env.HasTimes {
			rc = engine.DefaultRunConfig(engine.Replay)
		}
		rc.Seed = 9001
		r, _, err := quant.CollectRows(context.Background(), env, m.Float(), []engine.RunConfig{rc}, 5000, 9001)
		if err != nil {
			return nil, fmt.Errorf("calibrate %s: %w", name, err)
		}
		rows = append(rows, r...)
	}
	a, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), info)
	if err != nil {
		return nil, fmt.Errorf("quantize %s: %w", name, err)
	}
	return a, nil
}

// openbCluster is a control plane with registered openb nodes and what
// was prepared while it started: the target workload and art.
type openbCluster[A any] struct {
	cp *ControlPlane
	// picked are the registered nodes in SelectNodes' order, in zones
	// edge-a, edge-b and edge-c in turn.
	picked []sim.NodeSpec
	// nodes are the registered nodes as the apiserver lists them.
	nodes  []corev1.Node
	target *sim.TargetWorkload
	art    A
	// prepared is how long prepare took.
	prepared time.Duration
}

// startOpenbCluster starts the control plane and registers n openb nodes
// (SelectNodes, zones edge-a/b/c in turn) while prepare runs on a
// calibration cluster of the same nodes and the target workload
// (edgeTarget, edgeThreshold) loads. It fails the test unless the
// apiserver lists exactly the n nodes.
func startOpenbCluster[A any](ctx context.Context, t testing.TB, n int, prepare func(*sim.Cluster) (A, error)) *openbCluster[A] {
	t.Helper()
	all, err := openb.LoadNodes("openb:"+openb.AllNodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	picked := slices.Clone(SelectNodes(all, n))
	zones := []string{"edge-a", "edge-b", "edge-c"}
	for i := range picked {
		picked[i].Zone = zones[i%len(zones)]
	}
	type artResult struct {
		a   A
		err error
		d   time.Duration
	}
	artCh := make(chan artResult, 1)
	go func() {
		start := time.Now()
		a, err := prepare(&sim.Cluster{Name: "calibration", Nodes: picked,
			Zones: []sim.Zone{{Name: "edge-a"}, {Name: "edge-b"}, {Name: "edge-c"}}})
		artCh <- artResult{a, err, time.Since(start)}
	}()
	targetCh := make(chan error, 1)
	var target *sim.TargetWorkload
	go func() {
		var err error
		target, err = edgeplugin.LoadTarget(edgeTarget, edgeThreshold)
		targetCh <- err
	}()
	cp := Start(t, Options{})
	if _, err := RegisterNodes(ctx, cp.Client, picked, 0); err != nil {
		t.Fatal(err)
	}
	list, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n {
		t.Fatalf("registered %d nodes, want %d", len(list.Items), n)
	}
	res := <-artCh
	if res.err != nil {
		t.Fatal(res.err)
	}
	if err := <-targetCh; err != nil {
		t.Fatal(err)
	}
	return &openbCluster[A]{cp: cp, picked: picked, nodes: list.Items, target: target, art: res.a, prepared: res.d}
}

// e2eSigner is a deterministic signing key (tests only).
func e2eSigner(t testing.TB, seed byte) *quant.Signer {
	t.Helper()
	var b [ed25519.SeedSize]byte
	for i := range b {
		b[i] = seed + byte(i)
	}
	s, err := quant.NewSigner(ed25519.NewKeyFromSeed(b[:]))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signedWithVersion encodes a copy of a with another version.
func signedWithVersion(t testing.TB, a *quant.Artifact, s *quant.Signer, version uint64) []byte {
	t.Helper()
	c := *a
	c.Header.Version = version
	b, err := c.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeAtomic replaces path with b in one rename, so the plugin's poller
// never reads a half-written model.
func writeAtomic(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// deployDir holds the shipped manifests (relative to this package).
const deployDir = "../../deploy/edge-scheduler"

// applyDeployRBAC creates the objects of deploy/edge-scheduler/rbac.yaml
// and returns a kubeconfig for its ServiceAccount (a TokenRequest token),
// so the scheduler runs with exactly the permissions the manifests grant.
func applyDeployRBAC(ctx context.Context, t testing.TB, cp *ControlPlane, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sa *corev1.ServiceAccount
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("rbac.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = cp.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case *corev1.ServiceAccount:
			sa = o
			_, err = cp.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cp.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cp.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("rbac.yaml: unexpected %T", obj)
		}
		if err != nil {
			t.Fatalf("rbac.yaml: %v", err)
		}
	}
	if sa == nil {
		t.Fatal("rbac.yaml has no ServiceAccount")
	}
	exp := int64(3600)
	tok, err := cp.Client.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", sa.Namespace, sa.Name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.URL, InsecureSkipTLSVerify: true}
	cfg.AuthInfos[sa.Name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: sa.Name}
	cfg.CurrentContext = "e2e"
	path := filepath.Join(dir, sa.Name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// deploySchedulerConfig rewrites deploy/edge-scheduler/scheduler-config.yaml
// for the test: its kubeconfig, leader election off, the model and key
// paths, and a 1 s reload interval; everything else (profile, plugins,
// scorer weights, target workload) is the shipped file's. It returns the
// new file and the EdgePolicy args it ends up with.
func deploySchedulerConfig(t testing.TB, dir, kubeconfig, modelPath, keyDir string) (string, edgeplugin.Args) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("scheduler-config.yaml: %v", err)
	}
	// Keep the shipped client settings (qps, burst); only the kubeconfig
	// is the test's.
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	profiles, _ := cfg["profiles"].([]any)
	if len(profiles) != 1 {
		t.Fatalf("scheduler-config.yaml: want one profile, got %d", len(profiles))
	}
	prof := profiles[0].(map[string]any)
	if prof["schedulerName"] != edgeSchedulerName {
		t.Fatalf("scheduler-config.yaml: schedulerName %v, want %s", prof["schedulerName"], edgeSchedulerName)
	}
	var args map[string]any
	pcs, _ := prof["pluginConfig"].([]any)
	for _, pc := range pcs {
		if m := pc.(map[string]any); m["name"] == edgeplugin.Name {
			args = m["args"].(map[string]any)
		}
	}
	if args == nil {
		t.Fatalf("scheduler-config.yaml: no pluginConfig for %s", edgeplugin.Name)
	}
	args["modelPath"] = modelPath
	args["modelKeys"] = []any{keyDir}
	args["reloadInterval"] = "1s"
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "scheduler-config.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	ab, err := yaml.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	a, err := edgeplugin.DecodeArgs(&runtime.Unknown{Raw: ab, ContentType: runtime.ContentTypeYAML})
	if err != nil {
		t.Fatal(err)
	}
	return path, *a
}

// metrics is one scrape of a /metrics endpoint: series ("name{labels}" as
// exposed) to value.
type metrics map[string]float64

func scrapeMetrics(ctx context.Context, url, token string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := insecureHTTPClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// sum adds the series of metric name whose labels contain every one of
// labels (each `key="value"`).
func (m metrics) sum(name string, labels ...string) float64 {
	var s float64
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			s += v
		}
	}
	return s
}

// series lists the series of metric name (for messages).
func (m metrics) series(name string) string {
	var out []string
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			out = append(out, fmt.Sprintf("%s %v", k, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// simReference is the simulator's view of the cluster, built from the
// Node and Pod objects with the conventions of docs/edge-plugin.md (nodes
// sorted by name, the plugin's compiled environment): the reference the
// scheduler's choices are compared with.
type simReference struct {
	env   *sim.Env
	names []string // node index -> name
	index map[string]int
}

func newSimReference(nodes []corev1.Node, target *sim.TargetWorkload) (*simReference, error) {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	cl := &sim.Cluster{Name: "kubernetes", GPUModels: sim.KnownGPUModels()}
	known := map[string]bool{}
	for _, m := range cl.GPUModels {
		known[m.Name] = true
	}
	zones := map[string]bool{}
	r := &simReference{index: map[string]int{}}
	for _, n := range nodes {
		a := n.Status.Allocatable
		spec := sim.NodeSpec{Name: n.Name, CPU: a.Cpu().MilliValue(), Memory: a.Memory().Value() >> 20, Zone: n.Labels[corev1.LabelTopologyZone]}
		if q, ok := a[edgeplugin.ResourceGPU]; ok && q.Value() > 0 {
			spec.GPUs = int(q.Value())
			spec.GPUModel = cmp.Or(n.Labels[edgeplugin.LabelGPUModel], "unknown")
		}
		arch, err := sim.ParseArch(n.Labels[corev1.LabelArchStable])
		if err != nil || arch == sim.ArchAny {
			arch = sim.ArchAMD64
		}
		spec.Arch = arch
		if s, ok := n.Annotations[edgeplugin.AnnotationFailureRate]; ok {
			if spec.FailureRate, err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("node %s: %v", n.Name, err)
			}
		}
		spec.Zone = cmp.Or(spec.Zone, "default")
		zones[spec.Zone] = true
		if spec.GPUModel != "" && !known[spec.GPUModel] {
			known[spec.GPUModel] = true
			cl.GPUModels = append(cl.GPUModels, sim.GPUModel{Name: spec.GPUModel})
		}
		r.index[n.Name] = len(cl.Nodes)
		r.names = append(r.names, n.Name)
		cl.Nodes = append(cl.Nodes, spec)
	}
	for _, z := range slices.Sorted(func(yield func(string) bool) {
		for z := range zones {
			if !yield(z) {
				return
			}
		}
	}) {
		cl.Zones = append(cl.Zones, sim.Zone{Name: z})
	}
	env, err := sim.NewEnv(cl, &sim.Workload{Name: "target"}, sim.EnvOptions{})
	if err != nil {
		return nil, err
	}
	env.Target = target
	r.env = env
	return r, nil
}

// simPodOf converts a pod as docs/edge-plugin.md describes (requests
// summed, memory in MiB rounded up, GPU requests, QoS and usage
// annotations); accepted GPU models become the simulator's GPUMask.
func (r *simReference) simPodOf(p *corev1.Pod) (sim.Pod, error) {
	req := PodRequests(p)
	sp := sim.Pod{
		CPU: req.Cpu().MilliValue(), Mem: (req.Memory().Value() + 1<<20 - 1) >> 20,
		Service: -1, Delete: sim.NoDeletion, Usage: sim.DefaultUsage(p.Name), QoS: sim.QoSBurstable,
	}
	if p.Spec.Priority != nil {
		sp.Priority = *p.Spec.Priority
	}
	switch p.Status.QOSClass {
	case corev1.PodQOSBestEffort:
		sp.QoS = sim.QoSBE
	case corev1.PodQOSGuaranteed:
		sp.QoS = sim.QoSGuaranteed
	}
	if s, ok := p.Annotations[edgeplugin.AnnotationQoS]; ok {
		q, err := sim.ParseQoS(s)
		if err != nil {
			return sp, err
		}
		sp.QoS = q
	}
	if s, ok := p.Annotations[edgeplugin.AnnotationCPUUsage]; ok {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return sp, err
		}
		sp.Usage = v
	}
	whole, milli := req[edgeplugin.ResourceGPU], req[edgeplugin.ResourceGPUMilli]
	switch {
	case whole.Value() > 0:
		sp.GPUs, sp.GPUMilli = int32(whole.Value()), sim.MilliGPU
	case milli.Value() >= sim.MilliGPU:
		sp.GPUs, sp.GPUMilli = int32(milli.Value()/sim.MilliGPU), sim.MilliGPU
	case milli.Value() > 0:
		sp.GPUs, sp.GPUMilli = 1, milli.Value()
	case p.Annotations[edgeplugin.AnnotationGPUMilli] != "":
		v, err := strconv.ParseInt(p.Annotations[edgeplugin.AnnotationGPUMilli], 10, 64)
		if err != nil {
			return sp, err
		}
		sp.GPUs, sp.GPUMilli = 1, v
	}
	if s := p.Annotations[edgeplugin.AnnotationGPUModels]; s != "" {
		for _, m := range strings.Split(s, ",") {
			if i, ok := r.env.ModelIndex(strings.TrimSpace(m)); ok {
				sp.GPUMask |= 1 << uint(i)
			}
		}
		if sp.GPUMask == 0 {
			return sp, fmt.Errorf("pod %s accepts none of the cluster's GPU models (%s)", p.Name, s)
		}
	}
	return sp, nil
}

// podDevices parses the gpu-devices annotation of a bound GPU pod.
func podDevices(p *corev1.Pod) ([]int, error) {
	s, ok := p.Annotations[edgeplugin.AnnotationGPUDevices]
	if !ok {
		return nil, fmt.Errorf("pod %s on %s has no %s annotation", p.Name, p.Spec.NodeName, edgeplugin.AnnotationGPUDevices)
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("pod %s: %s=%q: %v", p.Name, edgeplugin.AnnotationGPUDevices, s, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// state binds every bound pod (with its recorded devices) into a fresh
// State: what the plugin sees in the scheduler's snapshot.
func (r *simReference) state(pods []corev1.Pod) (*sim.State, error) {
	st := sim.NewState(r.env)
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		n, ok := r.index[p.Spec.NodeName]
		if !ok {
			return nil, fmt.Errorf("pod %s on unknown node %s", p.Name, p.Spec.NodeName)
		}
		sp, err := r.simPodOf(p)
		if err != nil {
			return nil, err
		}
		var dev []int
		if sp.GPUs > 0 {
			if dev, err = podDevices(p); err != nil {
				return nil, err
			}
		}
		id, err := st.AddPod(sp)
		if err == nil {
			err = st.Bind(id, n, dev)
		}
		if err != nil {
			return nil, fmt.Errorf("pod %s on %s: %v", p.Name, p.Spec.NodeName, err)
		}
	}
	return st, nil
}

// decision is the simulator's view of one scheduling decision.
type decision struct {
	feasible []string
	ties     []string           // the best-scored nodes (the simulator's tie rule)
	scores   map[string]float64 // raw int8 policy scores
	devices  map[string][]int   // the policy's device choice on each tied node
}

// decide scores pod on st with the int8 net, as int8net.Factory's policy
// does in the simulator, and returns the tied-best set.
func (r *simReference) decide(net *int8net.Net, st *sim.State, sp sim.Pod) (*decision, error) {
	pol, err := int8net.Factory("int8", net).New(r.env)
	if err != nil {
		return nil, err
	}
	id, err := st.AddPod(sp)
	if err != nil {
		return nil, err
	}
	p := &st.Pods[id]
	var cand []int32
	for n := range st.Nodes {
		if st.Feasible(n, p) {
			cand = append(cand, int32(n))
		}
	}
	d := &decision{scores: map[string]float64{}, devices: map[string][]int{}}
	if len(cand) == 0 {
		return d, nil
	}
	scores := make([]float64, len(cand))
	pol.Score(st, p, cand, scores)
	best := math.Inf(-1)
	for _, s := range scores {
		best = max(best, s)
	}
	eps := 1e-9 * max(1, math.Abs(best)) // sim's runner.pick and the plugin's normalize
	picker, _ := pol.(sim.GPUPicker)
	for i, n := range cand {
		name := r.names[n]
		d.feasible = append(d.feasible, name)
		d.scores[name] = scores[i]
		if scores[i] >= best-eps {
			d.ties = append(d.ties, name)
			if p.GPUs > 0 && picker != nil {
				d.devices[name] = picker.PickGPUs(st, p, int(n), nil)
			}
		}
	}
	return d, nil
}

// edgeRun is the running test: control plane, scheduler, reference.
type edgeRun struct {
	t        *testing.T
	cp       *ControlPlane
	sched    *Process
	ref      *simReference
	nodes    []corev1.Node
	seq      int
	maxShare int64
	// metricsURL is what waitMetric scrapes, without a token ("": the
	// scheduler's /metrics, with the control plane's token).
	metricsURL string
	// boardZones are the two boards followDependency registers (once),
	// by name: their zones.
	boardZones map[string]string
}

func (r *edgeRun) allPods(ctx context.Context) []corev1.Pod {
	r.t.Helper()
	list, err := r.cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "app=edge-e2e"})
	if err != nil {
		r.t.Fatal(err)
	}
	return list.Items
}

func (r *edgeRun) scrape(ctx context.Context) metrics {
	r.t.Helper()
	m, err := scrapeMetrics(ctx, r.sched.URL+"/metrics", r.cp.Token)
	if err != nil {
		r.t.Fatalf("scheduler metrics: %v", err)
	}
	return m
}

// waitMetric polls the scheduler's metrics until cond holds or 30 s pass.
func (r *edgeRun) waitMetric(ctx context.Context, what string, cond func(metrics) bool) metrics {
	r.t.Helper()
	var last metrics
	var lastErr error
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if r.metricsURL != "" {
			last, lastErr = scrapeMetrics(ctx, r.metricsURL, "")
		} else {
			last, lastErr = scrapeMetrics(ctx, r.sched.URL+"/metrics", r.cp.Token)
		}
		return lastErr == nil && cond(last), nil
	})
	if err != nil {
		r.t.Fatalf("waiting for %s: %v (last scrape error %v); model_version: %s; refusals: %s", what, err, lastErr,
			last.series("edgesched_plugin_model_version"), last.series("edgesched_plugin_model_refusals_total"))
	}
	r.t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
	return last
}

// waitBound polls one pod until it is bound (at most 30 s).
func (r *edgeRun) waitBound(ctx context.Context, ns, name string) *corev1.Pod {
	r.t.Helper()
	var p *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 25*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = r.cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", nil
	})
	if err != nil {
		msg := ""
		if p != nil {
			for _, c := range p.Status.Conditions {
				msg += fmt.Sprintf(" %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		r.t.Fatalf("pod %s/%s not bound: %v;%s", ns, name, err, msg)
	}
	return p
}

func (r *edgeRun) create(ctx context.Context, ns string) *corev1.Pod {
	r.t.Helper()
	i := r.seq
	r.seq++
	p := edgePod(fmt.Sprintf("%s-%03d", ns, i), edgeShapes[i%len(edgeShapes)])
	if _, err := r.cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		r.t.Fatalf("create %s: %v", p.Name, err)
	}
	return p
}

// parity creates n pods one at a time in ns; after each binding it checks
// that the chosen node is in the simulator's tied-best set for the state
// before the pod (and, for GPU pods, that the devices are the policy's).
// other, if set, is a second net whose tie sets are only counted: how many
// choices it would not have made.
func (r *edgeRun) parity(ctx context.Context, ns string, n int, net, other *int8net.Net) {
	r.t.Helper()
	if err := CreateNamespace(ctx, r.cp.Client, ns); err != nil {
		r.t.Fatal(err)
	}
	nontrivial, gpu, differ, explained := 0, 0, 0, 0
	start := time.Now()
	for range n {
		before := r.allPods(ctx)
		st, err := r.ref.state(before)
		if err != nil {
			r.t.Fatal(err)
		}
		created := r.create(ctx, ns)
		bound := r.waitBound(ctx, ns, created.Name)
		sp, err := r.ref.simPodOf(bound)
		if err != nil {
			r.t.Fatal(err)
		}
		d, err := r.ref.decide(net, st, sp)
		if err != nil {
			r.t.Fatal(err)
		}
		node := bound.Spec.NodeName
		if len(d.ties) == 0 {
			r.t.Fatalf("pod %s: edge-scheduler chose %s, the simulator finds no feasible node", bound.Name, node)
		}
		if !slices.Contains(d.ties, node) {
			r.t.Fatalf("pod %s: edge-scheduler chose %s (sim score %v), the simulator's int8 policy ties %v (score %v); feasible %d nodes",
				bound.Name, node, d.scores[node], d.ties, d.scores[d.ties[0]], len(d.feasible))
		}
		if len(d.ties) < len(d.feasible) {
			nontrivial++
		}
		// EdgePolicy's Bind writes the explanation in the Binding, so the
		// pod is bound with it (the scheduler scores only with more than
		// one feasible node)
		if len(d.feasible) > 1 {
			e, err := edgeplugin.ParseExplanation(bound.Annotations[edgeplugin.AnnotationExplanation])
			if err != nil {
				r.t.Fatalf("pod %s bound to %s: %v (annotations %v)", bound.Name, node, err, bound.Annotations)
			}
			if e.Node != node || e.Candidates < 2 || e.NormalizedScore != 100 {
				r.t.Fatalf("pod %s bound to %s: explanation %+v", bound.Name, node, e)
			}
			explained++
		}
		if sp.GPUs > 0 {
			gpu++
			got, err := podDevices(bound)
			if err != nil {
				r.t.Fatal(err)
			}
			if want := d.devices[node]; !slices.Equal(got, want) {
				r.t.Fatalf("pod %s on %s: devices %v, the simulator's policy picks %v", bound.Name, node, got, want)
			}
		}
		if other != nil {
			st2, err := r.ref.state(before)
			if err != nil {
				r.t.Fatal(err)
			}
			d2, err := r.ref.decide(other, st2, sp)
			if err != nil {
				r.t.Fatal(err)
			}
			if !slices.Contains(d2.ties, node) {
				differ++
			}
		}
		r.t.Logf("%s -> %s (tied best %d of %d feasible)", bound.Name, node, len(d.ties), len(d.feasible))
	}
	r.t.Logf("parity: %d of %d decisions agree with the simulator (%d narrower than the feasible set, %d GPU pods with matching devices, %d explained) in %s",
		n, n, nontrivial, gpu, explained, time.Since(start).Round(time.Millisecond))
	if other != nil {
		r.t.Logf("the previous model would not have chosen %d of these %d nodes", differ, n)
		if differ == 0 {
			r.t.Fatalf("the previous model would have made all %d choices too: the swap is not observable in the bindings", n)
		}
	}
	if nontrivial < n/2 {
		r.t.Fatalf("only %d of %d decisions were narrower than the feasible set: the comparison proves little", nontrivial, n)
	}
}

// batch creates n pods at once in ns and waits for all of them.
func (r *edgeRun) batch(ctx context.Context, ns string, n int) {
	r.t.Helper()
	if err := CreateNamespace(ctx, r.cp.Client, ns); err != nil {
		r.t.Fatal(err)
	}
	start := time.Now()
	for range n {
		r.create(ctx, ns)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := WaitForPodsBound(wctx, r.cp.Client, ns, "app=edge-e2e", n, 50*time.Millisecond); err != nil {
		r.t.Fatalf("%v\nallocation (requested/allocatable):\n%s", err, r.usageReport(ctx))
	}
	r.t.Logf("batch: %d pods bound %s after creation", n, time.Since(start).Round(time.Millisecond))
}

// usageReport renders each node's requested and allocatable CPU, memory
// and GPU share, and its GPU pods' devices (for failure messages).
func (r *edgeRun) usageReport(ctx context.Context) string {
	pods := r.allPods(ctx)
	var b strings.Builder
	for _, n := range r.nodes {
		var on []corev1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == n.Name {
				on = append(on, p)
			}
		}
		req := corev1.ResourceList{}
		var devs []string
		for i := range on {
			for k, q := range PodRequests(&on[i]) {
				v := req[k]
				v.Add(q)
				req[k] = v
			}
			if d, ok := on[i].Annotations[edgeplugin.AnnotationGPUDevices]; ok {
				sp, _ := r.ref.simPodOf(&on[i])
				devs = append(devs, fmt.Sprintf("%s:%d", d, sp.GPUMilli))
			}
		}
		a := n.Status.Allocatable
		fmt.Fprintf(&b, "  %s %s: %d pods, cpu %s/%s, mem %s/%s, gpu-milli %s/%s %v\n", n.Name, n.Labels[edgeplugin.LabelGPUModel], len(on),
			ptrQ(req, corev1.ResourceCPU), ptrQ(a, corev1.ResourceCPU), ptrQ(req, corev1.ResourceMemory), ptrQ(a, corev1.ResourceMemory),
			ptrQ(req, edgeplugin.ResourceGPUMilli), ptrQ(a, edgeplugin.ResourceGPUMilli), devs)
	}
	return b.String()
}

// checkCluster checks every binding so far: resources fit (CheckFits),
// every GPU pod names distinct devices that exist on its node, no device
// holds more than 1000 milli-GPU, and every pod is bound.
func (r *edgeRun) checkCluster(ctx context.Context) {
	r.t.Helper()
	pods := r.allPods(ctx)
	if err := CheckFits(r.nodes, pods); err != nil {
		r.t.Fatalf("a binding does not fit its node:\n%v", err)
	}
	nodes := map[string]*corev1.Node{}
	for i := range r.nodes {
		nodes[r.nodes[i].Name] = &r.nodes[i]
	}
	used := map[string][]int64{}
	gpuPods := 0
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" {
			r.t.Fatalf("pod %s/%s is not bound", p.Namespace, p.Name)
		}
		sp, err := r.ref.simPodOf(p)
		if err != nil {
			r.t.Fatal(err)
		}
		if sp.GPUs == 0 {
			if _, ok := p.Annotations[edgeplugin.AnnotationGPUDevices]; ok {
				r.t.Errorf("CPU pod %s has a %s annotation", p.Name, edgeplugin.AnnotationGPUDevices)
			}
			continue
		}
		gpuPods++
		dev, err := podDevices(p)
		if err != nil {
			r.t.Fatal(err)
		}
		n := nodes[p.Spec.NodeName]
		q := n.Status.Allocatable[edgeplugin.ResourceGPU]
		count := int(q.Value())
		if len(dev) != int(sp.GPUs) {
			r.t.Errorf("pod %s wants %d devices, annotation names %v", p.Name, sp.GPUs, dev)
		}
		if m := sp.GPUMask; m != 0 {
			i, _ := r.ref.env.ModelIndex(n.Labels[edgeplugin.LabelGPUModel])
			if m&(1<<uint(i)) == 0 {
				r.t.Errorf("pod %s accepts %s, bound to %s with model %s", p.Name, p.Annotations[edgeplugin.AnnotationGPUModels], n.Name, n.Labels[edgeplugin.LabelGPUModel])
			}
		}
		u := used[n.Name]
		if u == nil {
			u = make([]int64, count)
			used[n.Name] = u
		}
		for j, g := range dev {
			if g < 0 || g >= count || slices.Contains(dev[:j], g) {
				r.t.Fatalf("pod %s on %s (%d devices): devices %v", p.Name, n.Name, count, dev)
			}
			u[g] += sp.GPUMilli
		}
	}
	for name, u := range used {
		for g, m := range u {
			if m > 1000 {
				r.t.Errorf("node %s device %d holds %d milli-GPU", name, g, m)
			}
			r.maxShare = max(r.maxShare, m)
		}
	}
	r.t.Logf("%d pods bound and fitting (%d GPU pods on %d nodes, devices within 1000 milli-GPU)", len(pods), gpuPods, len(used))
}

// checkNoFailures asserts that no scheduling attempt of the profile
// failed, no cycle fell back to neutral scores, and no pod has a
// FailedScheduling event.
func (r *edgeRun) checkNoFailures(ctx context.Context) {
	r.t.Helper()
	m := r.scrape(ctx)
	profile := `profile="` + edgeSchedulerName + `"`
	ok := m.sum("scheduler_schedule_attempts_total", profile, `result="scheduled"`)
	bad := m.sum("scheduler_schedule_attempts_total", profile, `result="unschedulable"`) + m.sum("scheduler_schedule_attempts_total", profile, `result="error"`)
	pods := r.allPods(ctx)
	if bad != 0 || int(ok) != len(pods) {
		r.t.Errorf("want %d scheduled attempts (one per pod) and no others: %s", len(pods), m.series("scheduler_schedule_attempts_total"))
	}
	if f := m.sum("edgesched_plugin_fallbacks_total"); f != 0 {
		r.t.Errorf("cycles scored neutrally: %s", m.series("edgesched_plugin_fallbacks_total"))
	}
	if p := m.sum("edgesched_plugin_panics_total"); p != 0 {
		r.t.Errorf("panics: %v", p)
	}
	if s := m.sum("edgesched_plugin_snapshot_pods_skipped_total"); s != 0 {
		r.t.Errorf("pods left out of the policy's view: %v", s)
	}
	ev, err := r.cp.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range ev.Items {
		r.t.Errorf("event %s %s/%s: %s", e.Reason, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
	}
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				r.t.Errorf("pod %s: PodScheduled %s %s: %s", p.Name, c.Status, c.Reason, c.Message)
			}
		}
	}
	r.t.Logf("%v scheduling attempts of profile %s, none failed; no fallbacks, panics or FailedScheduling events", ok, edgeSchedulerName)
}

// TestEdgeSchedulerEndToEnd runs edge-scheduler with EdgePolicy against
// kine + kube-apiserver and 32 heterogeneous openb nodes.
func TestEdgeSchedulerEndToEnd(t *testing.T) {
	began := time.Now()
	bins := Build(t, KinePkg, APIServerPkg, "github.com/edgesched/edgesched/cmd/edge-scheduler", AgentPkg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Quantizing (calibration runs of both shipped models) overlaps with
	// the control plane's start.
	oc := startOpenbCluster(ctx, t, edgeNodes, quantizeShipped)
	cp, picked, target := oc.cp, oc.picked, oc.target
	// A few nodes report a failure rate (a convention the policy reads).
	for _, name := range []string{picked[1].Name, picked[4].Name, picked[7].Name} {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"0.5"}}}`, edgeplugin.AnnotationFailureRate)
		if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// the nodes listed again, as the policy sees them: with those annotations
	nodeList, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpuNodes := 0
	for _, n := range nodeList.Items {
		if q, ok := n.Status.Allocatable[edgeplugin.ResourceGPU]; ok && q.Value() > 0 {
			gpuNodes++
		}
	}
	t.Logf("registered %d nodes (%d with GPUs) at %s", len(nodeList.Items), gpuNodes, time.Since(began).Round(time.Millisecond))
	if len(nodeList.Items) != edgeNodes || gpuNodes < 10 || gpuNodes == edgeNodes {
		t.Fatalf("want %d nodes, GPU and CPU-only: got %d, %d with GPUs", edgeNodes, len(nodeList.Items), gpuNodes)
	}
	arts := oc.art
	t.Logf("quantized the shipped default (v1) and edge (v2) models in %s", oc.prepared.Round(time.Millisecond))
	net1, err := int8net.New(arts.v1)
	if err != nil {
		t.Fatal(err)
	}
	net2, err := int8net.New(arts.v2)
	if err != nil {
		t.Fatal(err)
	}

	// Keys and model files: the trusted public key alone in its directory,
	// the private keys elsewhere.
	dir := t.TempDir()
	trusted, untrusted := e2eSigner(t, 1), e2eSigner(t, 101)
	keyDir := trustedKeyDir(t, dir, trusted)
	modelPath := filepath.Join(dir, "model", "policy.esa")
	writeAtomic(t, modelPath, signedWithVersion(t, arts.v1, trusted, 1))

	// The shipped configuration and RBAC: the scheduler talks to the
	// apiserver as the manifests' ServiceAccount.
	kubeconfig := applyDeployRBAC(ctx, t, cp, dir)
	cfgPath, args := deploySchedulerConfig(t, dir, kubeconfig, modelPath, keyDir)
	if args.TargetWorkload != edgeTarget || *args.TargetThreshold != edgeThreshold {
		t.Fatalf("the shipped config's target is %s/%v; the reference was built for %s/%v", args.TargetWorkload, *args.TargetThreshold, edgeTarget, edgeThreshold)
	}
	// Its secure port (/metrics) also authenticates and authorizes
	// requests as that ServiceAccount (the later flags win).
	sched := cp.StartScheduler(t, SchedulerOptions{Binary: bins[2], ConfigFile: cfgPath,
		Args: []string{"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig}})

	ref, err := newSimReference(nodeList.Items, target)
	if err != nil {
		t.Fatal(err)
	}
	r := &edgeRun{t: t, cp: cp, sched: sched, ref: ref, nodes: nodeList.Items}
	m := r.waitMetric(ctx, "model v1 loaded", func(m metrics) bool {
		return m.sum("edgesched_plugin_model_version") == 1 && m.sum("edgesched_plugin_model_swaps_total") == 1
	})
	if s := m.sum("edgesched_plugin_model_refusals_total"); s != 0 {
		t.Fatalf("refusals at start: %s", m.series("edgesched_plugin_model_refusals_total"))
	}
	t.Logf("edge-scheduler ready with model v1 at %s", time.Since(began).Round(time.Millisecond))

	if !t.Run("ParityV1", func(t *testing.T) {
		r.t = t
		r.parity(ctx, "parity-v1", 24, net1, nil)
		r.checkCluster(ctx)
	}) {
		return
	}
	if !t.Run("BatchBindsAndFits", func(t *testing.T) {
		r.t = t
		r.batch(ctx, "batch-v1", 36)
		r.checkCluster(ctx)
		r.checkNoFailures(ctx)
	}) {
		return
	}
	if !t.Run("HotSwap", func(t *testing.T) {
		r.t = t
		writeAtomic(t, modelPath, signedWithVersion(t, arts.v2, trusted, 2))
		r.waitMetric(ctx, "model v2 installed", func(m metrics) bool {
			return m.sum("edgesched_plugin_model_version") == 2 && m.sum("edgesched_plugin_model_swaps_total") == 2
		})
		r.parity(ctx, "parity-v2", 12, net2, net1)
		r.batch(ctx, "batch-v2", 16)
		r.checkCluster(ctx)
		r.checkNoFailures(ctx)
	}) {
		return
	}
	t.Run("UntrustedSignatureRefused", func(t *testing.T) {
		r.t = t
		writeAtomic(t, modelPath, signedWithVersion(t, arts.v1, untrusted, 3))
		m := r.waitMetric(ctx, "the untrusted model refused", func(m metrics) bool {
			return m.sum("edgesched_plugin_model_refusals_total", `reason="signature"`) >= 1
		})
		if v, s := m.sum("edgesched_plugin_model_version"), m.sum("edgesched_plugin_model_swaps_total"); v != 2 || s != 2 {
			t.Fatalf("after the refusal: model_version %s, swaps %v (want v2 kept, 2 swaps)", m.series("edgesched_plugin_model_version"), s)
		}
		if other := m.sum("edgesched_plugin_model_refusals_total") - m.sum("edgesched_plugin_model_refusals_total", `reason="signature"`); other != 0 {
			t.Errorf("refusals other than the signature: %s", m.series("edgesched_plugin_model_refusals_total"))
		}
		// Scheduling goes on with v2: the choices still agree with v2's.
		r.parity(ctx, "parity-after-refusal", 8, net2, nil)
		r.checkCluster(ctx)
		r.checkNoFailures(ctx)
	})
	t.Run("TelemetryFallback", func(t *testing.T) {
		r.t = t
		r.telemetryFallback(ctx)
		r.checkCluster(ctx)
		r.checkNoFailures(ctx)
	})
	t.Run("Dependencies", func(t *testing.T) {
		r.t = t
		r.dependencies(ctx, "deps", args)
		r.checkCluster(ctx)
	})
	t.Run("Topology", func(t *testing.T) {
		r.t = t
		r.topology(ctx, "topo", args)
		r.checkCluster(ctx)
	})
	t.Run("DependenciesBeyondOneHop", func(t *testing.T) {
		r.t = t
		writeAtomic(t, modelPath, signedWithVersion(t, arts.sage, trusted, 4))
		r.waitMetric(ctx, "model v4 (edge-sage) installed", func(m metrics) bool {
			return m.sum("edgesched_plugin_model_version") == 4
		})
		r.dependenciesBeyondOneHop(ctx, "deps-sage", args)
		r.checkCluster(ctx)
	})
	t.Run("ObservedChain", func(t *testing.T) {
		r.t = t
		// its own deadline: the agent's flows take tens of seconds
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		r.observedChain(ctx, "deps-chain", args, bins[3])
		r.checkCluster(ctx)
	})
	t.Logf("max milli-GPU on one device: %d; whole test %s", r.maxShare, time.Since(began).Round(time.Millisecond))
}

// setTelemetry writes a fresh telemetry summary (CPU 35% busy) to every
// node, or with remove deletes the annotation.
func (r *edgeRun) setTelemetry(ctx context.Context, remove bool) {
	r.t.Helper()
	value := "null"
	if !remove {
		enc, err := kubefmt.EncodeTelemetry(kubefmt.TelemetrySummary{Time: time.Now().UTC(), Window: 10 * time.Second, CPU: 0.35, Mem: 0.5, Load1: 1})
		if err != nil {
			r.t.Fatal(err)
		}
		raw, err := json.Marshal(enc)
		if err != nil {
			r.t.Fatal(err)
		}
		value = string(raw)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + kubefmt.AnnotationTelemetry + `":` + value + `}}}`)
	for _, n := range r.nodes {
		if _, err := r.cp.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			r.t.Fatalf("patch telemetry of %s: %v", n.Name, err)
		}
	}
}

// missingDelta schedules one pod and returns how many "missing" telemetry
// fallbacks the plugin counted meanwhile (one per modelled node without
// a summary, per cycle).
func (r *edgeRun) missingDelta(ctx context.Context, ns string) float64 {
	r.t.Helper()
	missing := func() float64 {
		return r.scrape(ctx).sum("edgesched_plugin_telemetry_fallbacks_total", `reason="missing"`)
	}
	before := missing()
	p := r.create(ctx, ns)
	r.waitBound(ctx, ns, p.Name)
	return missing() - before
}

// telemetryFallback: with a fresh telemetry summary on every node a
// scheduling cycle counts no fallback; after the annotations are deleted
// the plugin falls back to the usage model for the nodes and counts it.
// The scheduler sees node updates through its informer, so each phase
// polls (a pod per try) until the count shows the new state.
func (r *edgeRun) telemetryFallback(ctx context.Context) {
	r.t.Helper()
	const ns = "telemetry"
	if err := CreateNamespace(ctx, r.cp.Client, ns); err != nil {
		r.t.Fatal(err)
	}
	if d := r.missingDelta(ctx, ns); d == 0 {
		r.t.Fatalf("no missing-telemetry fallback counted before any node reported telemetry")
	}
	r.setTelemetry(ctx, false)
	phase := func(what string, ok func(float64) bool) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			d := r.missingDelta(ctx, ns)
			if ok(d) {
				r.t.Logf("%s: %v missing-telemetry fallbacks in the cycle", what, d)
				return
			}
			if time.Now().After(deadline) {
				r.t.Fatalf("%s: still %v missing-telemetry fallbacks per cycle after 30s", what, d)
			}
		}
	}
	phase("every node reporting", func(d float64) bool { return d == 0 })
	r.setTelemetry(ctx, true)
	phase("annotations deleted", func(d float64) bool { return d > 0 })
}

// trustedKeyDir writes s's key pair under dir and returns the directory
// that holds its public key alone (dir/trusted-keys/coordinator.pub; the
// private key stays in dir/signing), as the scheduler's modelKeys.
func trustedKeyDir(t testing.TB, dir string, s *quant.Signer) string {
	t.Helper()
	keyDir := filepath.Join(dir, "trusted-keys")
	for _, d := range []string{keyDir, filepath.Join(dir, "signing")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, pub, err := quant.WriteKeyPair(filepath.Join(dir, "signing"), "coordinator", s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pub, filepath.Join(keyDir, "coordinator.pub")); err != nil {
		t.Fatal(err)
	}
	return keyDir
}

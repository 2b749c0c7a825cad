//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubescheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"sigs.k8s.io/yaml"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// This file tests deploy/ (docs/deploy.md):
//   - TestDeployChart: the Helm chart deploy/helm/edgesched rendered with
//     several value sets (and refused with bad ones), `helm lint --strict`,
//     every rendered object applied with a server-side dry-run against the
//     real kube-apiserver; the committed deploy/manifests/*.yaml equal to a
//     fresh render and accepted the same way; deploy/k3s/helmchart.yaml
//     accepted against a minimal HelmChart CRD the test registers and its
//     valuesContent rendering; the chart's scheduler configuration and RBAC
//     in sync with deploy/edge-scheduler; and a real install of the site
//     side: edge-scheduler runs as the chart's ServiceAccount with the
//     chart's KubeSchedulerConfiguration, takes its Lease, installs the model
//     from the chart's model ConfigMap and binds a pod; the agent's RBAC is
//     checked with SubjectAccessReviews.
//   - TestDeployNATSConfigs: the chart's and deploy/nats's hub and leaf
//     configurations parsed by nats-server's own parser and run in process:
//     the leaf connects to the hub with the configured credentials and
//     JetStream works through it.
//   - TestDeployNATSCluster (deploy_cloud_e2e_test.go): the chart's
//     3-server configuration run as a real JetStream cluster;
//     TestDeployCloudRuns: on it, the chart's coordinator replicas (one
//     active, a takeover after SIGKILL) and a regional aggregator; the value
//     set "cloud-ha-regions" (NATS cluster, HA coordinator, regional
//     aggregators) is TestDeployChart's.
//   - TestDeployProgramFlags: every flag the chart and the systemd units pass
//     to edge-coordinator and edge-agent exists in the built binaries.
//   - TestDeploySystemdUnits: the units' hardening, `systemd-analyze
//     verify` and `systemd-analyze security` (exposure bounded).

// Helm, pinned like a Go tool but installed with `go install pkg@version`
// (Makefile target helm) so the main go.mod does not carry it.
const (
	HelmPkg     = "helm.sh/helm/v3/cmd/helm"
	HelmVersion = "v3.22.0" // the Makefile's HELM_VERSION (checked)
	// HelmEnv names a helm binary to use instead of bin/tools/helm.
	HelmEnv = "EDGESCHED_HELM"
)

const (
	chartDir           = "../../deploy/helm/edgesched"
	deployRoot         = "../../deploy"
	chartRelease       = "edgesched"
	chartNamespace     = "edgesched-system"
	deployFieldManager = "edgesched-deploy-e2e"
	// The K3s HelmChart example and the CRDs the test registers.
	helmChartExample = "../../deploy/k3s/helmchart.yaml"
	crdDir           = "testdata/crds"
)

// helmCLI runs one helm binary with its caches in a temporary directory
// (nothing is written to the user's home).
type helmCLI struct {
	bin  string
	root string // module root: commands run there
	env  []string
}

// findHelm returns the helm of $EDGESCHED_HELM, else the Makefile's
// bin/tools/helm, else one built once (go install, cached across runs).
// It checks the version against HelmVersion and the Makefile's pin.
func findHelm(t *testing.T) *helmCLI {
	t.Helper()
	if testing.Short() {
		t.Skip("deploy: skipped under -short (helm and a control plane)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^HELM_VERSION \?= ` + regexp.QuoteMeta(HelmVersion) + `$`).Match(mk) {
		t.Fatalf("the Makefile does not pin HELM_VERSION ?= %s: update HelmVersion in %s with it", HelmVersion, "test/e2e/deploy_e2e_test.go")
	}
	bin := os.Getenv(HelmEnv)
	switch {
	case bin != "":
		if !fileExists(bin) {
			t.Fatalf("%s=%s: no such file", HelmEnv, bin)
		}
	case fileExists(filepath.Join(root, "bin", "tools", "helm")):
		bin = filepath.Join(root, "bin", "tools", "helm")
	default:
		m, err := findModule()
		if err != nil {
			t.Skipf("deploy: no helm ($%s unset, no bin/tools/helm: run make helm) and cannot build one: %v", HelmEnv, err)
		}
		bin = buildHelm(t, m)
	}
	home := t.TempDir()
	h := &helmCLI{bin: bin, root: root, env: append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))}
	// The module version go install recorded (helm's own `helm version`
	// says only "v3.22" without release ldflags).
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	if info.Main.Path != "helm.sh/helm/v3" || info.Main.Version != HelmVersion {
		t.Fatalf("%s is %s %s, want helm.sh/helm/v3 %s (the Makefile's HELM_VERSION): run make helm", bin, info.Main.Path, info.Main.Version, HelmVersion)
	}
	t.Logf("helm %s at %s", HelmVersion, bin)
	return h
}

// buildHelm installs HelmPkg@HelmVersion once into the e2e cache (next to
// the kine/kube-apiserver binaries), under a lock shared by test binaries.
func buildHelm(t *testing.T, m *module) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(m.cacheDir), "helm-"+HelmVersion)
	bin := filepath.Join(dir, "helm")
	if fileExists(bin) {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if fileExists(bin) {
		return bin
	}
	scratch, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(scratch)
	t.Logf("deploy: building %s@%s (about 2 minutes on a cold cache; `make helm` builds it into bin/tools)", HelmPkg, HelmVersion)
	start := time.Now()
	cmd := exec.Command(m.goBin, "install", "-ldflags", "-X helm.sh/helm/v3/internal/version.version="+HelmVersion, HelmPkg+"@"+HelmVersion)
	cmd.Dir = scratch // outside the module: go install pkg@version ignores go.mod anyway
	cmd.Env = append(os.Environ(), "GOBIN="+scratch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s: %v\n%s", HelmPkg, HelmVersion, err, out)
	}
	if err := os.Rename(filepath.Join(scratch, "helm"), bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("deploy: built helm in %s", time.Since(start).Round(time.Second))
	return bin
}

// run runs helm in the module root and returns its standard output; the
// error carries its standard error.
func (h *helmCLI) run(args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Dir = h.root
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// template renders the chart as release edgesched in edgesched-system,
// for a cluster with chartAPI, with extra helm arguments (--set, -f).
func (h *helmCLI) template(args ...string) (string, error) {
	return h.run(append([]string{"template", chartRelease, "deploy/helm/edgesched", "--namespace", chartNamespace, "--api-versions", chartAPI}, args...)...)
}

// chartAPI is an API of the clusters the chart is rendered for beyond
// those helm template assumes (it asks no cluster): the agent's admission
// policy needs it (Kubernetes 1.30+), and the e2e apiserver serves it.
const chartAPI = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"

// render renders the chart (h.template) and returns its objects, also
// indexed; it fails t when helm or the YAML fails.
func (h *helmCLI) render(t *testing.T, args ...string) ([]*unstructured.Unstructured, objSet) {
	t.Helper()
	raw, err := h.template(args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseObjects(raw)
	if err != nil {
		t.Fatal(err)
	}
	return objs, indexObjects(t, objs)
}

// parseObjects splits a multi-document YAML stream into objects, skipping
// empty documents (comments only).
func parseObjects(raw string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(raw)))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, doc)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d has no apiVersion, kind or metadata.name:\n%s", i, doc)
		}
		objs = append(objs, u)
	}
}

func objKey(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

// objSet indexes rendered objects by Kind/name.
type objSet map[string]*unstructured.Unstructured

func indexObjects(t *testing.T, objs []*unstructured.Unstructured) objSet {
	t.Helper()
	s := objSet{}
	for _, o := range objs {
		k := objKey(o)
		if o.GetNamespace() == "kube-system" {
			k += "@kube-system"
		}
		if _, dup := s[k]; dup {
			t.Errorf("rendered twice: %s", k)
		}
		s[k] = o
	}
	return s
}

// typed converts a rendered object to its typed form (e.g. *appsv1.DaemonSet).
func typed[T any](t *testing.T, s objSet, key string) *T {
	t.Helper()
	u, ok := s[key]
	if !ok {
		t.Fatalf("not rendered: %s", key)
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &out, true); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return &out
}

// applier applies objects with server-side apply, as kubectl apply
// --server-side does, resolving kinds through discovery.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T, cp *ControlPlane) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Client.Discovery()))}
}

// apply applies one object; dryRun makes it DryRun=All (validated and
// admitted, never stored).
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk, obj.GetName(), err)
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		// Plain manifests (K3s's auto-deploy folder) have no -n: every
		// namespaced object must name its namespace.
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s %s is namespaced but has no metadata.namespace", gvk.Kind, obj.GetName())
		}
		ri = a.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	} else if obj.GetNamespace() != "" {
		return fmt.Errorf("%s %s is cluster-scoped but has metadata.namespace %q", gvk.Kind, obj.GetName(), obj.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: deployFieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Apply(ctx, obj.GetName(), obj, opts); err != nil {
		return fmt.Errorf("%s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// applyAll applies every object, failing t for each refusal.
func (a *applier) applyAll(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	ok := 0
	for _, o := range objs {
		if err := a.apply(ctx, o, dryRun); err != nil {
			t.Errorf("refused: %v", err)
			continue
		}
		ok++
	}
	mode := "applied"
	if dryRun {
		mode = "accepted by a server-side dry-run"
	}
	t.Logf("%d/%d objects %s", ok, len(objs), mode)
}

// registerCRDs creates the CRDs in testdata/crds and waits until they are
// established and discovered.
func (a *applier) registerCRDs(ctx context.Context, t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", crdDir, err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := parseObjects(string(raw))
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s: want one CRD: %v", f, err)
		}
		if _, err := a.dyn.Resource(crdGVR).Create(ctx, objs[0], metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := objs[0].GetName()
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := a.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", name, err)
		}
	}
	a.mapper.Reset()
}

// valueSet is one way to install the chart.
type valueSet struct {
	name   string
	args   []string // helm --set / -f arguments
	want   []string // Kind/name that must be rendered
	absent []string // Kind/name that must not
	check  func(t *testing.T, s objSet)
	notes  string // a line NOTES.txt must print
}

// refusal is a value set helm must refuse, with what its error names.
type refusal struct {
	name string
	args []string
	want string // in helm's error
}

// Names the chart gives objects installed as release "edgesched".
const (
	agentDS = "DaemonSet/edgesched-agent"
	// the admission policy that keeps each agent to its own Node
	agentNodePolicy        = "ValidatingAdmissionPolicy/edgesched-agent-own-node"
	agentNodePolicyBinding = "ValidatingAdmissionPolicyBinding/edgesched-agent-own-node"
	schedDeploy            = "Deployment/edgesched-scheduler"
	schedConfig            = "ConfigMap/edgesched-scheduler-config"
	coordSTS               = "StatefulSet/edgesched-coordinator"
	natsSTS                = "StatefulSet/edgesched-nats"
	natsCM                 = "ConfigMap/edgesched-nats"
	leafDeploy             = "Deployment/edgesched-nats-leaf"
	leafCM                 = "ConfigMap/edgesched-nats-leaf"
	siteLeaderRol          = "Role/edgesched:site-leader"
	modelCM                = "ConfigMap/edgesched-model"
	keysCM                 = "ConfigMap/edgesched-trusted-keys"
	nsObj                  = "Namespace/" + chartNamespace
)

// A public key in edgectl's format, for value sets that only render.
func testPublicKey(t *testing.T) string {
	t.Helper()
	_, pub, err := quant.WriteKeyPair(t.TempDir(), "coordinator", e2eSigner(t, 7))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func volumeByName(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// checkAgentPrivileges asserts the agent pod's privileges: caps exactly,
// dropped ALL, not privileged, read-only root, and the host mounts.
func checkAgentPrivileges(t *testing.T, s objSet, wantCaps []corev1.Capability, wantNoEscalation bool) {
	t.Helper()
	ds := typed[appsv1.DaemonSet](t, s, agentDS)
	spec := ds.Spec.Template.Spec
	c := container(t, spec, "agent")
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("agent: no securityContext.capabilities")
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("agent drops %v, want [ALL]", sc.Capabilities.Drop)
	}
	if !slices.Equal(sc.Capabilities.Add, wantCaps) {
		t.Errorf("agent adds %v, want %v", sc.Capabilities.Add, wantCaps)
	}
	if sc.Privileged == nil || *sc.Privileged {
		t.Error("agent: privileged must be set to false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("agent: root filesystem must be read-only")
	}
	if got := sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation; got != wantNoEscalation {
		t.Errorf("agent: allowPrivilegeEscalation=false is %v, want %v", got, wantNoEscalation)
	}
	var nodeName bool
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Error("agent: NODE_NAME is not the downward API's spec.nodeName")
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "metrics" {
		t.Errorf("agent: liveness probe %+v, want GET /healthz on the metrics port", p)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for path, readOnly := range map[string]bool{"/sys/fs/cgroup": true, "/var/lib/edgesched": false} {
		m, ok := mounts[path]
		if !ok {
			t.Errorf("agent: %s is not mounted", path)
			continue
		}
		if m.ReadOnly != readOnly {
			t.Errorf("agent: %s readOnly %v, want %v", path, m.ReadOnly, readOnly)
		}
		if v := volumeByName(spec, m.Name); v == nil || v.HostPath == nil || v.HostPath.Path != path {
			t.Errorf("agent: %s is not the host's %s", m.Name, path)
		}
	}
}

// checkSchedulerModelState asserts the scheduler's rollback floor
// (scheduler.modelState): with it, modelStatePath in the plugin args on a
// hostPath volume, handed to the scheduler's user by a root init
// container holding CAP_CHOWN alone, the Deployment recreated; without
// it none of these.
func checkSchedulerModelState(t *testing.T, s objSet, want bool) {
	t.Helper()
	const dir, file = "/var/lib/edgesched-scheduler", "/var/lib/edgesched-scheduler/plugin-state.db"
	d := typed[appsv1.Deployment](t, s, schedDeploy)
	spec := d.Spec.Template.Spec
	cfg := typed[corev1.ConfigMap](t, s, schedConfig).Data["scheduler-config.yaml"]
	v := volumeByName(spec, "model-state")
	if !want {
		if v != nil || len(spec.InitContainers) != 0 || strings.Contains(cfg, "modelStatePath") || d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
			t.Errorf("scheduler without model state: volume %+v, init containers %d, Recreate %v, config:\n%s", v, len(spec.InitContainers), d.Spec.Strategy.Type, cfg)
		}
		return
	}
	if !strings.Contains(cfg, "modelStatePath: "+file) {
		t.Errorf("scheduler configuration has no modelStatePath %s:\n%s", file, cfg)
	}
	if v == nil || v.HostPath == nil || v.HostPath.Path != dir || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("scheduler model-state volume %+v, want hostPath %s (DirectoryOrCreate)", v, dir)
	}
	mounted := false
	for _, m := range container(t, spec, "scheduler").VolumeMounts {
		mounted = mounted || (m.Name == "model-state" && m.MountPath == dir && !m.ReadOnly)
	}
	if !mounted {
		t.Errorf("scheduler: model-state not mounted read-write at %s", dir)
	}
	if len(spec.InitContainers) != 1 {
		t.Fatalf("scheduler init containers %d, want the one that hands the state directory over", len(spec.InitContainers))
	}
	ic := spec.InitContainers[0]
	sc := ic.SecurityContext
	if !slices.Equal(ic.Command, []string{"chown", "65532:65532", dir}) || sc == nil || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"CHOWN"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("init container %q %v: want chown of %s to 65532 with CAP_CHOWN alone, no privilege escalation", ic.Name, ic.Command, dir)
	}
	if ps := spec.SecurityContext; ps == nil || ps.RunAsUser == nil || *ps.RunAsUser != 65532 {
		t.Error("the scheduler must still run as uid 65532")
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("scheduler strategy %s, want Recreate (one pod at a time holds the state file)", d.Spec.Strategy.Type)
	}
}

// checkSchedulerDependencies checks that the scheduler reads the
// dependency graph from ConfigMap name in the release namespace (its
// dependenciesConfigMap arg, get/list/watch on it), or, with name "", that
// it reads none.
func checkSchedulerDependencies(t *testing.T, s objSet, name string) {
	t.Helper()
	cm := typed[corev1.ConfigMap](t, s, schedConfig)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &cfg); err != nil {
		t.Fatalf("chart scheduler-config.yaml: %v", err)
	}
	var got any
	for _, pc := range cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any) {
		if m := pc.(map[string]any); m["name"] == edgeplugin.Name {
			got = m["args"].(map[string]any)["dependenciesConfigMap"]
		}
	}
	want := any(nil)
	if name != "" {
		want = chartNamespace + "/" + name
	}
	if got != want {
		t.Errorf("scheduler args: dependenciesConfigMap %v, want %v", got, want)
	}
	role := typed[rbacv1.Role](t, s, "Role/edgesched:edge-scheduler")
	readable := false
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "configmaps") && slices.Contains(r.Verbs, "watch") && name != "" && slices.Contains(r.ResourceNames, name) {
			readable = true
		}
	}
	if readable != (name != "") {
		t.Errorf("scheduler Role %+v: watch on ConfigMap %q %v", role.Rules, name, readable)
	}
}

// agentArgs returns the agent container's arguments.
func agentArgs(t *testing.T, s objSet) []string {
	t.Helper()
	return container(t, typed[appsv1.DaemonSet](t, s, agentDS).Spec.Template.Spec, "agent").Args
}

// rbacPerms is every "GROUP RESOURCE VERB" (with " NAME" for rules
// narrowed by resourceNames) that rules grant, sorted.
func rbacPerms(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					p := fmt.Sprintf("%s %s %s", g, res, v)
					if len(r.ResourceNames) == 0 {
						out = append(out, p)
					}
					for _, n := range r.ResourceNames {
						out = append(out, p+" "+n)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkAgentRBAC asserts the agent's RBAC is what its API client
// (internal/kube.Interface) does and no more: every agent merge-patches
// its own Node's annotation; with a site name every agent's trace
// recorder lists and watches Pods and Nodes (informers: never a get), and
// the site leader's Role covers its Lease (get, watch with the name's
// field selector, update; create), the model, dependency graph and ledger
// ConfigMaps (get, update; create) and the handovers (get, list, delete).
// The agent records no Events (its client has no Events API).
func checkAgentRBAC(t *testing.T, s objSet, site string) {
	t.Helper()
	want := []string{" nodes patch"}
	if site != "" {
		want = append(want, " nodes list", " nodes watch", " pods list", " pods watch")
	}
	slices.Sort(want)
	if got := rbacPerms(typed[rbacv1.ClusterRole](t, s, "ClusterRole/edgesched:agent").Rules); !slices.Equal(got, want) {
		t.Errorf("agent ClusterRole grants %q, want exactly %q", got, want)
	}
	if site == "" {
		if _, ok := s[siteLeaderRol]; ok {
			t.Errorf("%s rendered without a site name", siteLeaderRol)
		}
		return
	}
	lease, ledger := "edgesched-site-"+site, "edgesched-site-"+site+"-ledger"
	want = []string{
		"coordination.k8s.io leases create",
		"coordination.k8s.io leases get " + lease, "coordination.k8s.io leases update " + lease, "coordination.k8s.io leases watch " + lease,
		" configmaps create", " configmaps delete", " configmaps get", " configmaps list",
		" configmaps get edgesched-model", " configmaps update edgesched-model",
		" configmaps get edgesched-dependencies", " configmaps update edgesched-dependencies",
		" configmaps get " + ledger, " configmaps update " + ledger,
	}
	slices.Sort(want)
	if got := rbacPerms(typed[rbacv1.Role](t, s, siteLeaderRol).Rules); !slices.Equal(got, want) {
		t.Errorf("site-leader Role grants %q, want exactly %q", got, want)
	}
}

// checkSchedulerArch asserts the scheduler's pods may only run on nodes
// of the architectures its image has (a required node affinity on
// kubernetes.io/arch): the chart's edge-scheduler image is built for
// linux/amd64 and linux/arm64 only, and an arm/v7 node of a mixed fleet
// (the agent's third platform) has no image to run it.
func checkSchedulerArch(t *testing.T, s objSet, want []string) {
	t.Helper()
	checkPodArch(t, schedDeploy, typed[appsv1.Deployment](t, s, schedDeploy).Spec.Template.Spec, want)
}

// checkPodArch asserts that the pods of spec require a node whose
// kubernetes.io/arch is one of want (nil: no such requirement).
func checkPodArch(t *testing.T, who string, spec corev1.PodSpec, want []string) {
	t.Helper()
	aff := spec.Affinity
	var got []string
	if aff != nil && aff.NodeAffinity != nil && aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if e.Key == corev1.LabelArchStable && e.Operator == corev1.NodeSelectorOpIn {
					got = append(got, e.Values...)
				}
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: node affinity %+v: kubernetes.io/arch in %q, want %q", who, aff, got, want)
	}
}

func TestDeployChart(t *testing.T) {
	h := findHelm(t)
	pub := testPublicKey(t)
	fakeModel := base64.StdEncoding.EncodeToString([]byte("not a model: only rendered and dry-run"))

	sets := []valueSet{
		{
			name: "default",
			want: []string{agentDS, schedDeploy, schedConfig, "ServiceAccount/edgesched-agent", "ClusterRole/edgesched:agent", "Service/edgesched-agent-metrics",
				agentNodePolicy, agentNodePolicyBinding},
			absent: []string{coordSTS, natsSTS, leafDeploy, siteLeaderRol, modelCM, keysCM, nsObj, "ServiceMonitor/edgesched-agent"},
			notes:  "No site.name: telemetry only",
			check: func(t *testing.T, s objSet) {
				checkAgentPrivileges(t, s, []corev1.Capability{"BPF", "PERFMON"}, true)
				ds := typed[appsv1.DaemonSet](t, s, agentDS)
				spec := ds.Spec.Template.Spec
				if !spec.HostNetwork || spec.HostPID || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
					t.Errorf("agent: hostNetwork %v hostPID %v dnsPolicy %s, want true false ClusterFirstWithHostNet", spec.HostNetwork, spec.HostPID, spec.DNSPolicy)
				}
				if v := volumeByName(spec, "tracefs"); v == nil || v.HostPath == nil || v.HostPath.Path != "/sys/kernel/tracing" {
					t.Errorf("agent: tracefs volume %+v, want hostPath /sys/kernel/tracing", v)
				}
				if args := agentArgs(t, s); !slices.Contains(args, "--tracefs=/sys/kernel/tracing") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--site") }) {
					t.Errorf("agent args %q: want --tracefs and no site flags without site.name", args)
				}
				if a := ds.Spec.Template.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "9560" {
					t.Errorf("agent pod annotations %v: want prometheus.io/scrape and port 9560", a)
				}
				checkSchedulerModelState(t, s, true)
				checkAgentRBAC(t, s, "")
				checkSchedulerArch(t, s, []string{"amd64", "arm64"})
			},
		},
		{
			// two leader-elected replicas with the rollback floor: on
			// distinct nodes (each opens its node's state file) and, as
			// every scheduler pod, only on amd64 and arm64 nodes
			name: "scheduler-replicas",
			args: []string{"--set", "scheduler.replicas=2"},
			want: []string{schedDeploy},
			check: func(t *testing.T, s objSet) {
				checkSchedulerArch(t, s, []string{"amd64", "arm64"})
				spec := typed[appsv1.Deployment](t, s, schedDeploy).Spec.Template.Spec
				if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
					t.Errorf("scheduler affinity %+v: want the required anti-affinity of the replicas", a)
				}
				if !strings.Contains(typed[corev1.ConfigMap](t, s, schedConfig).Data["scheduler-config.yaml"], "leaderElect: true") {
					t.Error("two scheduler replicas without leader election")
				}
			},
		},
		{
			// an operator's own scheduler image for every architecture
			name: "scheduler-any-architecture",
			args: []string{"--set", "scheduler.architectures=null"},
			want: []string{schedDeploy},
			check: func(t *testing.T, s objSet) {
				checkSchedulerArch(t, s, nil)
			},
		},
		{
			// the rollback floor in memory only: no hostPath, no root init
			// container, and without the agent every pod meets restricted
			// and no dependency graph: the scheduler reads none
			name: "scheduler-without-state",
			args: []string{"--set", "namespace.create=true", "--set", "agent.enabled=false", "--set", "scheduler.modelState.hostPath=",
				"--set", "site.dependenciesConfigMap="},
			want:   []string{nsObj, schedDeploy, schedConfig},
			absent: []string{agentDS, agentNodePolicy},
			check: func(t *testing.T, s objSet) {
				checkSchedulerModelState(t, s, false)
				checkSchedulerDependencies(t, s, "")
				if ns := s[nsObj].GetLabels(); ns["pod-security.kubernetes.io/enforce"] != "restricted" {
					t.Errorf("namespace labels %v: without the agent and the state hostPath every pod meets restricted", ns)
				}
			},
		},
		{
			name: "site",
			args: []string{"--set", "namespace.create=true", "--set", "site.name=lab-1",
				"--set", "nats.leaf.enabled=true", "--set", "nats.leaf.remoteURLSecret=leaf-remote",
				"--set", "site.natsCredsSecret=nats-creds",
				"--set-string", `trustedKeys.keys.coordinator\.pub=` + pub,
				"--set-string", "model.artifactBase64=" + fakeModel,
				"--set", "agent.metrics.serviceMonitor.enabled=true"},
			want:   []string{nsObj, agentDS, schedDeploy, leafDeploy, leafCM, "Service/edgesched-nats-leaf", siteLeaderRol, modelCM, keysCM, "ServiceMonitor/edgesched-agent"},
			absent: []string{coordSTS, natsSTS},
			notes:  `Site "lab-1": the site leader holds the Lease edgesched-site-lab-1`,
			check: func(t *testing.T, s objSet) {
				args := agentArgs(t, s)
				for _, a := range []string{"--site=lab-1", "--namespace=" + chartNamespace, "--server=nats://edgesched-nats-leaf.edgesched-system.svc:4222",
					"--creds=/etc/edgesched/nats/nats.creds", "--site-key=/etc/edgesched/site-key/site.key",
					"--model-configmap=edgesched-model", "--model-configmap-key=model.esa", "--model-keys=/etc/edgesched/trusted-keys",
					"--model-max-age=0s", "--freeze-after=1h", "--dependencies-configmap=edgesched-dependencies", "--dependencies-interval=1m"} {
					if !slices.Contains(args, a) {
						t.Errorf("agent args %q: missing %s", args, a)
					}
				}
				if slices.Contains(args, "--dependencies-embeddings") {
					t.Errorf("agent args %q: embeddings on by default", args)
				}
				role := typed[rbacv1.Role](t, s, siteLeaderRol)
				var lease, deps bool
				for _, r := range role.Rules {
					if slices.Contains(r.Resources, "leases") && slices.Contains(r.ResourceNames, "edgesched-site-lab-1") && slices.Contains(r.Verbs, "update") {
						lease = true
					}
					if slices.Contains(r.Resources, "configmaps") && slices.Contains(r.ResourceNames, "edgesched-dependencies") && slices.Contains(r.Verbs, "update") {
						deps = true
					}
				}
				if !lease || !deps {
					t.Errorf("site-leader Role %+v: want update on Lease edgesched-site-lab-1 (%v) and ConfigMap edgesched-dependencies (%v)", role.Rules, lease, deps)
				}
				checkSchedulerDependencies(t, s, "edgesched-dependencies")
				if a := s[modelCM].GetAnnotations(); a["helm.sh/resource-policy"] != "keep" {
					t.Errorf("model ConfigMap annotations %v: want helm.sh/resource-policy keep", a)
				}
				if ns := s[nsObj].GetLabels(); ns["pod-security.kubernetes.io/enforce"] != "privileged" {
					t.Errorf("namespace labels %v: the agent needs the privileged Pod Security level", ns)
				}
				checkAgentRBAC(t, s, "lab-1")
				// Docker Hub's nats image has every platform: the leaf may
				// run on any node unless nats.leaf.architectures says
				checkPodArch(t, leafDeploy, typed[appsv1.Deployment](t, s, leafDeploy).Spec.Template.Spec, nil)
			},
		},
		{
			// the security model of docs/security.md: the site's own NKey
			// and mutual TLS, a custom model key
			name: "site-nkey-mtls",
			args: []string{"--set", "namespace.create=true", "--set", "site.name=lab-2",
				"--set", "site.natsURL=tls://nats.example.org:4222",
				"--set", "site.natsNKeySecret=nats-nkey", "--set", "site.natsTLSSecret=nats-tls", "--set", "site.natsMutualTLS=true",
				"--set", "model.key=policy.esa", "--set", "site.dependenciesConfigMap=lab-2-deps", "--set", "site.dependenciesInterval=30s",
				"--set", "site.dependenciesEmbeddings=true",
				"--set-string", `trustedKeys.keys.coordinator\.pub=` + pub},
			want:   []string{nsObj, agentDS, schedDeploy, schedConfig, siteLeaderRol, keysCM},
			absent: []string{coordSTS, natsSTS, leafDeploy},
			notes:  `Site "lab-2"`,
			check: func(t *testing.T, s objSet) {
				args := agentArgs(t, s)
				for _, a := range []string{"--site=lab-2", "--server=tls://nats.example.org:4222", "--nkey=/etc/edgesched/nats-nkey/nats.nk",
					"--tlsca=/etc/edgesched/nats-tls/ca.crt", "--tlscert=/etc/edgesched/nats-tls/tls.crt", "--tlskey=/etc/edgesched/nats-tls/tls.key",
					"--model-configmap-key=policy.esa", "--dependencies-configmap=lab-2-deps", "--dependencies-interval=30s", "--dependencies-embeddings"} {
					if !slices.Contains(args, a) {
						t.Errorf("agent args %q: missing %s", args, a)
					}
				}
				if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--creds") }) {
					t.Errorf("agent args %q: --creds without natsCredsSecret", args)
				}
				// the scheduler reads the key and the dependency graph the
				// agent writes
				if cm := s[schedConfig]; cm == nil || !strings.Contains(fmt.Sprint(cm.Object["data"]), "modelConfigMapKey: policy.esa") {
					t.Errorf("scheduler configuration does not read model key policy.esa: %v", cm)
				}
				checkSchedulerDependencies(t, s, "lab-2-deps")
			},
		},
		{
			name: "cloud",
			args: []string{"--set", "cloud.enabled=true"},
			want: []string{agentDS, schedDeploy, coordSTS, natsSTS, natsCM, "Service/edgesched-nats", "Service/edgesched-nats-leafnodes", "Service/edgesched-coordinator"},
			check: func(t *testing.T, s objSet) {
				sts := typed[appsv1.StatefulSet](t, s, coordSTS)
				if *sts.Spec.Replicas != 1 {
					t.Errorf("coordinator replicas %d, want 1 (bbolt has one writer)", *sts.Spec.Replicas)
				}
				if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().Cmp(resource.MustParse("1Gi")) != 0 {
					t.Errorf("coordinator PVC templates %+v: want one of 1Gi", sts.Spec.VolumeClaimTemplates)
				}
				c := container(t, sts.Spec.Template.Spec, "coordinator")
				if !slices.Contains(c.Args, "--server=nats://edgesched-nats.edgesched-system.svc:4222") || !slices.Contains(c.Args, "--data=/var/lib/edge-coordinator") {
					t.Errorf("coordinator args %q: want the in-cluster NATS and the PVC data dir", c.Args)
				}
				conf, _, _ := unstructured.NestedString(s[natsCM].Object, "data", "nats.conf")
				for _, want := range []string{"jetstream {", `store_dir: "/data/jetstream"`, "leafnodes {", "port: 7422"} {
					if !strings.Contains(conf, want) {
						t.Errorf("hub nats.conf lacks %q:\n%s", want, conf)
					}
				}
				n := typed[appsv1.StatefulSet](t, s, natsSTS)
				if img := container(t, n.Spec.Template.Spec, "nats").Image; !strings.HasPrefix(img, "nats:") {
					t.Errorf("NATS image %s, want the official nats image", img)
				}
			},
		},
		{
			name: "cloud-only",
			args: []string{"--set", "namespace.create=true", "--set", "site.enabled=false", "--set", "cloud.enabled=true",
				"--set-string", `cloud.coordinator.sites.lab-1\.pub=` + pub,
				"--set", "cloud.nats.leafnodeAuthSecret=leaf-auth", "--set", "cloud.nats.leafnodeServiceType=LoadBalancer"},
			want:   []string{nsObj, coordSTS, natsSTS, "ConfigMap/edgesched-sites"},
			notes:  "edge-coordinator edgesched-coordinator",
			absent: []string{agentDS, schedDeploy, schedConfig, leafDeploy, "ServiceAccount/edgesched-agent", "ClusterRole/edgesched:agent", agentNodePolicy},
			check: func(t *testing.T, s objSet) {
				if ns := s[nsObj].GetLabels(); ns["pod-security.kubernetes.io/enforce"] != "restricted" {
					t.Errorf("namespace labels %v: without the agent every pod meets restricted", ns)
				}
				conf, _, _ := unstructured.NestedString(s[natsCM].Object, "data", "nats.conf")
				if !strings.Contains(conf, "user: $LEAF_USER") || !strings.Contains(conf, "password: $LEAF_PASSWORD") {
					t.Errorf("hub nats.conf has no leaf-node authorization:\n%s", conf)
				}
			},
		},
		{
			name: "legacy-kernel",
			args: []string{"--set", "agent.ebpf.legacyKernel=true"},
			want: []string{agentDS},
			check: func(t *testing.T, s objSet) {
				checkAgentPrivileges(t, s, []corev1.Capability{"SYS_ADMIN", "SYS_RESOURCE"}, true)
			},
		},
		{
			// kernels 5.8 to 5.10 have CAP_BPF and CAP_PERFMON but still
			// charge eBPF maps to the memlock rlimit (64 KiB under K3s's
			// systemd unit on such distributions): the loader raises it,
			// which takes CAP_SYS_RESOURCE (docs/deploy.md, "Privileges")
			name: "kernel-5.10",
			args: []string{"--set", "agent.extraCapabilities={SYS_RESOURCE}"},
			want: []string{agentDS},
			check: func(t *testing.T, s objSet) {
				checkAgentPrivileges(t, s, []corev1.Capability{"BPF", "PERFMON", "SYS_RESOURCE"}, true)
			},
		},
		{
			name: "proc-only",
			args: []string{"--set", "agent.ebpf.enabled=false", "--set", "agent.hostNetwork=false"},
			want: []string{agentDS},
			check: func(t *testing.T, s objSet) {
				checkAgentPrivileges(t, s, nil, true)
				spec := typed[appsv1.DaemonSet](t, s, agentDS).Spec.Template.Spec
				if volumeByName(spec, "tracefs") != nil || !slices.Contains(agentArgs(t, s), "--no-ebpf") || spec.DNSPolicy != corev1.DNSClusterFirst {
					t.Errorf("without eBPF: want --no-ebpf, no tracefs volume, dnsPolicy ClusterFirst (got %s)", spec.DNSPolicy)
				}
			},
		},
	}
	sets = append(sets, cloudHAValueSet(t, pub))
	refused := append(cloudRefusals(), []refusal{
		{"site name not a DNS label", []string{"--set", "site.name=Lab_1"}, "/site/name"},
		{"unknown key", []string{"--set", "agent.hostNetwrk=true"}, "hostNetwrk"},
		{"site without NATS", []string{"--set", "site.name=lab-1"}, "has no NATS server"},
		{"two NATS identities", []string{"--set", "site.natsCredsSecret=a", "--set", "site.natsNKeySecret=b"}, "mutually exclusive"},
		{"leaf without hub", []string{"--set", "nats.leaf.enabled=true"}, "needs the hub's leaf-node URL"},
		{"nothing to install", []string{"--set", "site.enabled=false"}, "nothing to install"},
		{"key file name", []string{"--set-string", `trustedKeys.keys.coordinator\.key=x`}, "coordinator.key"},
		{"JetStream size syntax", []string{"--set", "cloud.enabled=true", "--set", "cloud.nats.jetstream.maxFileStore=8Gi"}, "maxFileStore"},
		{"dependency graph in the model's ConfigMap", []string{"--set", "site.dependenciesConfigMap=edgesched-model"}, "must differ from model.configMapName"},
		{"dependency graph ConfigMap name", []string{"--set", "site.dependenciesConfigMap=Deps_1"}, "/site/dependenciesConfigMap"},
		{"topology in the dependency graph's ConfigMap", []string{"--set", "site.topologyConfigMap=edgesched-dependencies"}, "site.topologyConfigMap must differ"},
		{"topology ConfigMap name", []string{"--set", "site.topologyConfigMap=Topo_1"}, "/site/topologyConfigMap"},
		{"policy in the topology's ConfigMap", []string{"--set", "site.policyConfigMap=edgesched-topology"}, "site.policyConfigMap must differ"},
		{"policy ConfigMap name", []string{"--set", "site.policyConfigMap=Policy_1"}, "/site/policyConfigMap"},
		{"dependency graph interval", []string{"--set", "site.dependenciesInterval=often"}, "/site/dependenciesInterval"},
		// two active schedulers would bind the same pods
		{"scheduler replicas without leader election", []string{"--set", "scheduler.replicas=2", "--set", "scheduler.leaderElect=false"}, "need leader election"},
		// K3s's embedded kube-scheduler is default-scheduler: edge-scheduler
		// under that name would place every pod of the cluster, racing it
		{"K3s's own scheduler name", []string{"--set", "scheduler.schedulerName=default-scheduler"}, "K3s's own scheduler"},
		{"scheduler architecture", []string{"--set", "scheduler.architectures={arm/v7}"}, "/scheduler/architectures"},
	}...)

	// Everything that only renders runs before the control plane starts.
	rendered := map[string][]*unstructured.Unstructured{}
	for _, vs := range sets {
		t.Run("Render/"+vs.name, func(t *testing.T) {
			out, err := h.run(append([]string{"lint", "--strict", "deploy/helm/edgesched", "--namespace", chartNamespace}, vs.args...)...)
			if err != nil || !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			objs, s := h.render(t, vs.args...)
			for _, k := range vs.want {
				if _, ok := s[k]; !ok {
					t.Errorf("not rendered: %s", k)
				}
			}
			for _, k := range vs.absent {
				if _, ok := s[k]; ok {
					t.Errorf("rendered but should not be: %s", k)
				}
			}
			if vs.check != nil {
				vs.check(t, s)
			}
			rendered[vs.name] = objs
		})
	}
	for _, rc := range refused {
		t.Run("Refused/"+rc.name, func(t *testing.T) {
			_, err := h.template(rc.args...)
			if err == nil || !strings.Contains(err.Error(), rc.want) {
				t.Fatalf("helm template %q: error %v, want one naming %q", rc.args, err, rc.want)
			}
		})
	}
	t.Run("SchedulerInSync", func(t *testing.T) { checkSchedulerSync(t, rendered["default"]) })
	// a cluster without ValidatingAdmissionPolicy (older than 1.30; helm
	// template without --api-versions assumes one): the agent keeps to
	// RBAC alone, and nothing else changes
	t.Run("Render/without-admission-policy-api", func(t *testing.T) {
		raw, err := h.run("template", chartRelease, "deploy/helm/edgesched", "--namespace", chartNamespace)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := parseObjects(raw)
		if err != nil {
			t.Fatal(err)
		}
		s, def := indexObjects(t, objs), indexObjects(t, rendered["default"])
		for name := range def {
			if _, ok := s[name]; !ok && name != agentNodePolicy && name != agentNodePolicyBinding {
				t.Errorf("%s missing without the admission policy API", name)
			}
		}
		if _, ok := s[agentNodePolicy]; ok || len(s) != len(def)-2 {
			t.Errorf("without the admission policy API: %d objects (policy rendered: %v), want the default's %d less its policy and binding", len(s), ok, len(def))
		}
	})

	cp := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := CreateNamespace(ctx, cp.Client, chartNamespace); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, cp)
	a.registerCRDs(ctx, t)

	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range sets {
		t.Run("DryRun/"+vs.name, func(t *testing.T) {
			objs, ok := rendered[vs.name]
			if !ok {
				t.Skipf("value set %s did not render", vs.name)
			}
			a.applyAll(ctx, t, objs, true)
			// Helm's own install against the server (its OpenAPI
			// validation, ownership checks) and the NOTES it prints.
			// The namespace exists: Helm would refuse to adopt a Namespace
			// object it did not create, so namespace.create is off here.
			out, err := h.run(append(append([]string{"install", chartRelease, "deploy/helm/edgesched", "--namespace", chartNamespace,
				"--dry-run=server", "--kubeconfig", kubeconfig}, vs.args...), "--set", "namespace.create=false")...)
			if err != nil {
				t.Fatal(err)
			}
			i := strings.Index(out, "NOTES:")
			notes := out[max(i, 0):]
			if i < 0 || !strings.Contains(notes, "Docs: docs/deploy.md") {
				t.Fatalf("helm install --dry-run=server printed no complete NOTES:\n%s", out)
			}
			if vs.notes != "" && !strings.Contains(notes, vs.notes) {
				t.Errorf("NOTES lack %q:\n%s", vs.notes, notes)
			}
		})
	}
	t.Run("DryRunRefuses", func(t *testing.T) { checkDryRunRefuses(ctx, t, a, rendered) })
	t.Run("Manifests", func(t *testing.T) { checkManifests(ctx, t, h, a) })
	t.Run("HelmChartResource", func(t *testing.T) { checkHelmChartResource(ctx, t, h, a) })
	t.Run("Install", func(t *testing.T) { checkInstall(ctx, t, h, a, cp) })
}

// checkDryRunRefuses shows the dry-run is not a rubber stamp: a misspelt
// field (schema) and a contradictory securityContext (privileged with
// allowPrivilegeEscalation false: validation) are refused.
func checkDryRunRefuses(ctx context.Context, t *testing.T, a *applier, rendered map[string][]*unstructured.Unstructured) {
	find := func(set, key string) *unstructured.Unstructured {
		for _, o := range rendered[set] {
			if objKey(o) == key {
				return o.DeepCopy()
			}
		}
		t.Fatalf("%s not rendered in %s", key, set)
		return nil
	}
	typo := find("default", agentDS)
	if err := unstructured.SetNestedField(typo.Object, true, "spec", "template", "spec", "hostNetwrk"); err != nil {
		t.Fatal(err)
	}
	escalation := find("default", agentDS)
	cs, _, _ := unstructured.NestedSlice(escalation.Object, "spec", "template", "spec", "containers")
	c := cs[0].(map[string]any)
	if err := unstructured.SetNestedField(c, true, "securityContext", "privileged"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(escalation.Object, cs, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string
	}{
		{"misspelt field", typo, "hostNetwrk"},
		{"privileged without privilege escalation", escalation, "allowPrivilegeEscalation"},
	} {
		err := a.apply(ctx, tc.obj, true)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: dry-run error %v, want a refusal naming %q", tc.name, err, tc.want)
		} else {
			t.Logf("%s refused as expected: %v", tc.name, err)
		}
	}
}

// checkManifests re-renders deploy/manifests/*.yaml with the command each
// file's header records, compares, and dry-run applies them.
func checkManifests(ctx context.Context, t *testing.T, h *helmCLI, a *applier) {
	files, err := filepath.Glob(filepath.Join(deployRoot, "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ has, hasNot []string }{
		"site.yaml":  {has: []string{agentDS, schedDeploy, schedConfig}, hasNot: []string{coordSTS, natsSTS}},
		"cloud.yaml": {has: []string{coordSTS, natsSTS, natsCM}, hasNot: []string{agentDS, schedDeploy}},
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if !slices.Equal(names, []string{"cloud.yaml", "site.yaml"}) {
		t.Fatalf("deploy/manifests holds %v, want cloud.yaml and site.yaml", names)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitN(string(raw), "\n", 3)
			cmdline, ok := strings.CutPrefix(lines[1], "# Rendered with: helm ")
			if len(lines) < 3 || !strings.HasPrefix(lines[0], "# Generated by `make manifests`") || !ok {
				t.Fatalf("%s: no `make manifests` header", f)
			}
			args := strings.Fields(cmdline)
			if len(args) < 3 || args[0] != "template" || args[2] != "deploy/helm/edgesched" {
				t.Fatalf("%s: header command %q is not a render of deploy/helm/edgesched", f, cmdline)
			}
			fresh, err := h.run(args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := lines[2]; got != fresh {
				t.Fatalf("%s differs from a fresh render (%s): run `make manifests` and commit it; %s", f, cmdline, firstDiff(got, fresh))
			}
			objs, err := parseObjects(fresh)
			if err != nil {
				t.Fatal(err)
			}
			// K3s applies a file in order: the namespace must come first.
			if objKey(objs[0]) != nsObj {
				t.Errorf("first object %s, want %s", objKey(objs[0]), nsObj)
			}
			s := indexObjects(t, objs)
			for _, k := range want[name].has {
				if _, ok := s[k]; !ok {
					t.Errorf("lacks %s", k)
				}
			}
			for _, k := range want[name].hasNot {
				if _, ok := s[k]; ok {
					t.Errorf("has %s", k)
				}
			}
			a.applyAll(ctx, t, objs, true)
		})
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("first difference at rendered line %d: committed %q, fresh %q", i+1, gl, wl)
		}
	}
	return "no line differs (line endings?)"
}

// checkHelmChartResource dry-run applies deploy/k3s/helmchart.yaml against
// the minimal HelmChart CRD (testdata/crds/helmchart.yaml: only the
// documented fields, so a misspelt one is refused), checks that its chart
// archive name carries the chart's version, and renders the chart with its
// valuesContent.
func checkHelmChartResource(ctx context.Context, t *testing.T, h *helmCLI, a *applier) {
	raw, err := os.ReadFile(helmChartExample)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseObjects(string(raw))
	if err != nil || len(objs) != 1 || objs[0].GetKind() != "HelmChart" {
		t.Fatalf("%s: want one HelmChart: %v", helmChartExample, err)
	}
	hc := objs[0]
	if err := a.apply(ctx, hc, true); err != nil {
		t.Fatalf("dry-run: %v", err)
	}
	chartYAML, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(chartYAML, &chart); err != nil {
		t.Fatal(err)
	}
	url, _, _ := unstructured.NestedString(hc.Object, "spec", "chart")
	if !strings.HasSuffix(url, "/edgesched-"+chart.Version+".tgz") {
		t.Errorf("spec.chart %q does not name the chart archive of version %s (helm package names it edgesched-%s.tgz)", url, chart.Version, chart.Version)
	}
	ns, _, _ := unstructured.NestedString(hc.Object, "spec", "targetNamespace")
	values, _, _ := unstructured.NestedString(hc.Object, "spec", "valuesContent")
	vf := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vf, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := h.run("template", hc.GetName(), "deploy/helm/edgesched", "--namespace", ns, "-f", vf)
	if err != nil {
		t.Fatalf("the chart does not render with the HelmChart's valuesContent: %v", err)
	}
	rendered, err := parseObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	s := indexObjects(t, rendered)
	for _, k := range []string{agentDS, schedDeploy, leafDeploy, siteLeaderRol} {
		if _, ok := s[k]; !ok {
			t.Errorf("valuesContent render lacks %s", k)
		}
	}
	a.applyAll(ctx, t, rendered, true)
}

// checkSchedulerSync compares the chart's KubeSchedulerConfiguration and
// scheduler RBAC with deploy/edge-scheduler: the same profile, plugin
// arguments (but for the model source, the dependency graph's ConfigMap
// and key paths, which the chart sets),
// client limits, built-in roles bound, and every permission of rbac.yaml.
func checkSchedulerSync(t *testing.T, objs []*unstructured.Unstructured) {
	if objs == nil {
		t.Skip("the default value set did not render")
	}
	s := indexObjects(t, objs)
	cm := typed[corev1.ConfigMap](t, s, schedConfig)
	var chartCfg, shipped map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &chartCfg); err != nil {
		t.Fatalf("chart scheduler-config.yaml: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(deployDir, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &shipped); err != nil {
		t.Fatal(err)
	}
	// The chart's own choices: the model from the ConfigMap, keys from the
	// mounted directory, the in-cluster client, the lease in its namespace.
	args := func(cfg map[string]any) map[string]any {
		for _, pc := range cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any) {
			if m := pc.(map[string]any); m["name"] == edgeplugin.Name {
				return m["args"].(map[string]any)
			}
		}
		t.Fatalf("no %s pluginConfig", edgeplugin.Name)
		return nil
	}
	ca, sa := args(chartCfg), args(shipped)
	// the args as the scheduler hands them to the plugin: the whole file
	// decoded by kube-scheduler's scheme (strict), defaulted, converted
	obj, _, err := kubescheme.Codecs.UniversalDecoder().Decode([]byte(cm.Data["scheduler-config.yaml"]), nil, nil)
	if err != nil {
		t.Fatalf("kube-scheduler refuses the chart's scheduler-config.yaml: %v", err)
	}
	var internal runtime.Object
	for _, pc := range obj.(*kubeconfig.KubeSchedulerConfiguration).Profiles[0].PluginConfig {
		if pc.Name == edgeplugin.Name {
			internal = pc.Args
		}
	}
	decoded, err := edgeplugin.DecodeArgs(internal)
	if err != nil {
		t.Fatalf("the chart's EdgePolicy args are refused by the plugin: %v", err)
	}
	if decoded.ModelConfigMap != chartNamespace+"/edgesched-model" || !slices.Equal(decoded.ModelKeys, []string{"/etc/edgesched/trusted-keys"}) ||
		decoded.ModelStatePath != "/var/lib/edgesched-scheduler/plugin-state.db" || decoded.DependenciesConfigMap != chartNamespace+"/edgesched-dependencies" ||
		decoded.TopologyConfigMap != chartNamespace+"/edgesched-topology" {
		t.Errorf("chart args: modelConfigMap %q modelKeys %q modelStatePath %q dependenciesConfigMap %q topologyConfigMap %q", decoded.ModelConfigMap, decoded.ModelKeys,
			decoded.ModelStatePath, decoded.DependenciesConfigMap, decoded.TopologyConfigMap)
	}
	// the shipped file reads them in the chart's namespace too
	for k, name := range map[string]string{"dependenciesConfigMap": "edgesched-dependencies", "topologyConfigMap": "edgesched-topology"} {
		if want := chartNamespace + "/" + name; sa[k] != want {
			t.Errorf("shipped args: %s %v, want %s", k, sa[k], want)
		}
	}
	for _, k := range []string{"modelPath", "modelConfigMap", "modelConfigMapKey", "modelKeys", "reloadInterval", "modelStatePath", "dependenciesConfigMap", "topologyConfigMap"} {
		delete(ca, k)
		delete(sa, k)
	}
	// telemetryMaxAge is explicit in the chart (a value); the shipped file
	// takes the plugin's default.
	if ca["telemetryMaxAge"] == edgeplugin.DefaultTelemetryMaxAge.String() || ca["telemetryMaxAge"] == "2m" {
		delete(ca, "telemetryMaxAge")
	}
	conn := func(cfg map[string]any) map[string]any {
		c, _ := cfg["clientConnection"].(map[string]any)
		c = copyMap(c)
		delete(c, "kubeconfig")
		return c
	}
	le := func(cfg map[string]any) any {
		return cfg["leaderElection"].(map[string]any)["leaderElect"]
	}
	for _, c := range []struct {
		what        string
		chart, ship any
	}{
		{"profiles", chartCfg["profiles"], shipped["profiles"]},
		{"clientConnection (but kubeconfig)", conn(chartCfg), conn(shipped)},
		{"leaderElection.leaderElect", le(chartCfg), le(shipped)},
		{"apiVersion and kind", []any{chartCfg["apiVersion"], chartCfg["kind"]}, []any{shipped["apiVersion"], shipped["kind"]}},
	} {
		cj, _ := yaml.Marshal(c.chart)
		sj, _ := yaml.Marshal(c.ship)
		if !bytes.Equal(cj, sj) {
			t.Errorf("%s differ between the chart and deploy/edge-scheduler/scheduler-config.yaml:\nchart:\n%s\nshipped:\n%s", c.what, cj, sj)
		}
	}

	// RBAC: every (group, resource, verb) rbac.yaml grants through its own
	// ClusterRoles, the chart grants the scheduler account; and the same
	// built-in roles are bound.
	raw, err = os.ReadFile(filepath.Join(deployDir, "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ship, err := parseObjects(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	type perm struct{ group, resource, verb string }
	grants := func(objs []*unstructured.Unstructured, kinds ...string) map[perm]bool {
		out := map[perm]bool{}
		for _, o := range objs {
			if !slices.Contains(kinds, o.GetKind()) || !strings.Contains(o.GetName(), "scheduler") {
				continue
			}
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			for _, rule := range r.Rules {
				for _, g := range rule.APIGroups {
					for _, res := range rule.Resources {
						for _, v := range rule.Verbs {
							out[perm{g, res, v}] = true
						}
					}
				}
			}
		}
		return out
	}
	chartPerms := grants(objs, "ClusterRole", "Role")
	for p := range grants(ship, "ClusterRole") {
		if !chartPerms[p] {
			t.Errorf("rbac.yaml grants %s %q in group %q; the chart does not", p.verb, p.resource, p.group)
		}
	}
	builtin := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
				continue
			}
			name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			if strings.HasPrefix(name, "system:") || strings.HasPrefix(name, "extension-apiserver") {
				out = append(out, o.GetKind()+"->"+name)
			}
		}
		slices.Sort(out)
		return out
	}
	if c, sh := builtin(objs), builtin(ship); !slices.Equal(c, sh) {
		t.Errorf("built-in roles bound: chart %v, rbac.yaml %v", c, sh)
	}
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// checkInstall installs the site side for real (server-side apply, no
// dry-run) with a trusted key and a signed model in the values, checks the
// agent's and scheduler's permissions with SubjectAccessReviews, then runs
// edge-scheduler as the chart's ServiceAccount with the chart's
// configuration: it takes the chart's Lease, installs the model from the
// chart's ConfigMap (a ModelInstalled Event) and binds a pod.
func checkInstall(ctx context.Context, t *testing.T, h *helmCLI, a *applier, cp *ControlPlane) {
	bin := Build(t, "github.com/edgesched/edgesched/cmd/edge-scheduler")[0]
	signer := e2eSigner(t, 1)
	dir := t.TempDir()
	_, pubPath, err := quant.WriteKeyPair(dir, "coordinator", signer)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	model := signedTestModel(ctx, t, signer)
	vf := filepath.Join(dir, "values.yaml")
	values, err := yaml.Marshal(map[string]any{
		"site":        map[string]any{"name": "lab-1", "natsURL": "nats://nats.example.invalid:4222"},
		"trustedKeys": map[string]any{"keys": map[string]any{"coordinator.pub": string(pub)}},
		"model":       map[string]any{"artifactBase64": base64.StdEncoding.EncodeToString(model)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vf, values, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := h.template("-f", vf)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseObjects(raw)
	if err != nil {
		t.Fatal(err)
	}
	a.applyAll(ctx, t, objs, false)
	if t.Failed() {
		return
	}
	s := indexObjects(t, objs)

	t.Run("AgentRBAC", func(t *testing.T) {
		checkAccess(ctx, t, cp, "edgesched-agent", []access{
			{"patch", "", "nodes", "", "node-1", true},
			{"get", "", "nodes", "", "node-1", false},
			{"list", "", "nodes", "", "", true},
			{"watch", "", "pods", "", "", true},
			{"get", "", "pods", "default", "p", false},
			{"update", "coordination.k8s.io", "leases", chartNamespace, "edgesched-site-lab-1", true},
			{"create", "coordination.k8s.io", "leases", chartNamespace, "", true},
			{"update", "coordination.k8s.io", "leases", chartNamespace, "edgesched-scheduler", false},
			{"update", "", "configmaps", chartNamespace, "edgesched-model", true},
			{"get", "", "configmaps", chartNamespace, "edgesched-dependencies", true},
			{"update", "", "configmaps", chartNamespace, "edgesched-dependencies", true},
			{"create", "", "configmaps", chartNamespace, "", true},
			// the site ledger and the handovers of queued updates
			{"get", "", "configmaps", chartNamespace, "edgesched-site-lab-1-ledger", true},
			{"update", "", "configmaps", chartNamespace, "edgesched-site-lab-1-ledger", true},
			{"list", "", "configmaps", chartNamespace, "", true},
			{"delete", "", "configmaps", chartNamespace, "edgesched-site-lab-1-update-17", true},
			{"update", "", "configmaps", chartNamespace, "edgesched-site-lab-1-update-17", false},
			{"update", "", "configmaps", chartNamespace, "edgesched-scheduler-config", false},
			{"delete", "", "configmaps", "kube-system", "edgesched-site-lab-1-update-17", false},
			{"update", "", "configmaps", "kube-system", "edgesched-model", false},
			// the agent's client has no Events API: it records none
			{"create", "", "events", chartNamespace, "", false},
			{"patch", "coordination.k8s.io", "leases", chartNamespace, "edgesched-site-lab-1", false},
			// the elector's watch carries the field selector
			// metadata.name=edgesched-site-lab-1: the authorizer sees the name
			{"watch", "coordination.k8s.io", "leases", chartNamespace, "edgesched-site-lab-1", true},
			{"watch", "coordination.k8s.io", "leases", chartNamespace, "", false},
			{"list", "", "pods", "", "", true},
			{"get", "", "secrets", chartNamespace, "edgesched-site-key", false},
			{"delete", "", "nodes", "", "node-1", false},
			{"update", "", "pods", "default", "p", false},
		})
	})
	t.Run("AgentOwnNodeOnly", func(t *testing.T) { checkAgentOwnNode(ctx, t, cp) })
	t.Run("SchedulerRBAC", func(t *testing.T) {
		checkAccess(ctx, t, cp, "edgesched-scheduler", []access{
			{"create", "", "pods/binding", "default", "p", true},
			{"update", "coordination.k8s.io", "leases", chartNamespace, "edgesched-scheduler", true},
			{"watch", "", "configmaps", chartNamespace, "edgesched-model", true},
			{"update", "", "configmaps", chartNamespace, "edgesched-model", false},
			{"list", "", "configmaps", chartNamespace, "edgesched-dependencies", true},
			{"watch", "", "configmaps", chartNamespace, "edgesched-dependencies", true},
			{"update", "", "configmaps", chartNamespace, "edgesched-dependencies", false},
			{"patch", "", "nodes", "", "node-1", false},
		})
	})

	t.Run("SchedulerRuns", func(t *testing.T) {
		// The chart's ServiceAccount, its token as a kubeconfig.
		exp := int64(3600)
		tok, err := cp.Client.CoreV1().ServiceAccounts(chartNamespace).CreateToken(ctx, "edgesched-scheduler",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kc := clientcmdapi.NewConfig()
		kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.URL, InsecureSkipTLSVerify: true}
		kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
		kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "sa"}
		kc.CurrentContext = "e2e"
		kubeconfig := filepath.Join(dir, "scheduler.kubeconfig")
		if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
			t.Fatal(err)
		}
		// The trusted-keys ConfigMap as the pod would see it mounted.
		keys := typed[corev1.ConfigMap](t, s, keysCM)
		keyDir := filepath.Join(dir, "mounted-keys")
		if err := os.MkdirAll(keyDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range keys.Data {
			if err := os.WriteFile(filepath.Join(keyDir, k), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The chart's configuration with only the paths of this machine.
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(typed[corev1.ConfigMap](t, s, schedConfig).Data["scheduler-config.yaml"]), &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["clientConnection"].(map[string]any)["kubeconfig"] = kubeconfig
		for _, pc := range cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any) {
			if m := pc.(map[string]any); m["name"] == edgeplugin.Name {
				m["args"].(map[string]any)["modelKeys"] = []any{keyDir}
				// the chart's state file, moved into the test's directory
				if _, ok := m["args"].(map[string]any)["modelStatePath"]; !ok {
					t.Fatal("the chart's scheduler configuration has no modelStatePath")
				}
				m["args"].(map[string]any)["modelStatePath"] = filepath.Join(dir, "scheduler-state", "plugin-state.db")
			}
		}
		b, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfgPath := filepath.Join(dir, "scheduler-config.yaml")
		if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
		// The harness turns leader election off by flag; a later flag
		// turns it back on, so the chart's lease settings apply.
		sched := cp.StartScheduler(t, SchedulerOptions{Binary: bin, Name: "edge-scheduler-chart", ConfigFile: cfgPath,
			Args: []string{"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig, "--leader-elect=true"}})

		poll := func(what string, cond func(ctx context.Context) (bool, error)) {
			t.Helper()
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, cond); err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
		}
		poll("the chart's scheduler Lease", func(ctx context.Context) (bool, error) {
			l, err := cp.Client.CoordinationV1().Leases(chartNamespace).Get(ctx, "edgesched-scheduler", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
		})
		// The model in the chart's ConfigMap, verified with the chart's
		// trusted keys, is the one in use. (No ModelInstalled Event to wait
		// for: the plugin installs it while the scheduler is created, before
		// kube-scheduler starts recording events, so that one is not
		// recorded.)
		poll("the chart's model installed (edgesched_plugin_model_version 1)", func(ctx context.Context) (bool, error) {
			m, err := scrapeMetrics(ctx, sched.URL+"/metrics", cp.Token)
			if err != nil {
				return false, nil
			}
			return m.sum("edgesched_plugin_model_version") == 1 && m.sum("edgesched_plugin_model_refusals_total") == 0, nil
		})
		// The rollback floor was written before the model was swapped in.
		if fi, err := os.Stat(filepath.Join(dir, "scheduler-state", "plugin-state.db")); err != nil || fi.Size() == 0 {
			t.Errorf("the chart's modelStatePath was not written: %v", err)
		}
		all, err := openb.LoadNodes("openb:"+openb.AllNodes, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RegisterNodes(ctx, cp.Client, SelectNodes(all, 3), 0); err != nil {
			t.Fatal(err)
		}
		const podNS = "deploy-e2e"
		if err := CreateNamespace(ctx, cp.Client, podNS); err != nil {
			t.Fatal(err)
		}
		pod := edgePod("chart-scheduled", edgeShapes[0])
		if _, err := cp.Client.CoreV1().Pods(podNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var node string
		poll("the pod bound by the chart's scheduler", func(ctx context.Context) (bool, error) {
			p, err := cp.Client.CoreV1().Pods(podNS).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			node = p.Spec.NodeName
			return node != "", nil
		})
		t.Logf("edge-scheduler with the chart's configuration and account: lease taken, model installed from the ConfigMap, pod bound to %s", node)
	})
}

// access is one SubjectAccessReview and its expected answer.
type access struct {
	verb, group, resource, namespace, name string
	allowed                                bool
}

// checkAccess asks the authorizer what the chart's ServiceAccount may do.
func checkAccess(ctx context.Context, t *testing.T, cp *ControlPlane, sa string, cases []access) {
	t.Helper()
	user := "system:serviceaccount:" + chartNamespace + ":" + sa
	for _, c := range cases {
		res, sub, _ := strings.Cut(c.resource, "/")
		r, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + chartNamespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: c.namespace, Verb: c.verb, Group: c.group, Resource: res, Subresource: sub, Name: c.name,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != c.allowed {
			t.Errorf("%s: %s %s %s/%s (group %q): allowed %v, want %v (%s)", sa, c.verb, c.resource, c.namespace, c.name, c.group, r.Status.Allowed, c.allowed, r.Status.Reason)
		}
	}
}

// signedTestModel quantizes the shipped "default" model with calibration
// rows from a small deterministic openb run (seed 9001, as the other e2e
// tests) and signs it.
func signedTestModel(ctx context.Context, t *testing.T, s *quant.Signer) []byte {
	t.Helper()
	nodes, err := openb.LoadNodes("openb:"+openb.AllNodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := openb.LoadPods(edgeTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := sim.NewEnv(&sim.Cluster{Name: "deploy-calibration", Nodes: SelectNodes(nodes, 8)},
		&sim.Workload{Name: "calibration", Pods: pl.Pods[:min(100, len(pl.Pods))], Untimed: !pl.Timed}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := models.Load("default")
	if err != nil {
		t.Fatal(err)
	}
	rc := engine.DefaultRunConfig(engine.Inflate)
	rc.Seed = 9001
	rows, _, err := quant.CollectRows(ctx, env, m.Float(), []engine.RunConfig{rc}, 1000, 9001)
	if err != nil {
		t.Fatal(err)
	}
	art, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), quant.Info{Version: 1, Created: time.Unix(1_800_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := art.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

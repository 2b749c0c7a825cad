//go:build unix

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgesched/edgesched/internal/imagecmd"
	"github.com/edgesched/edgesched/internal/ociimage"
	"github.com/edgesched/edgesched/quant"
)

// This file tests docs/quickstart-k3s.md against the e2e control plane:
// every shell command the page marks "# test" is run (kubectl's creates
// as client-go calls, helm install as helm template plus a server-side
// dry run of what it renders), every YAML block it marks "# test: KIND"
// is applied with a server-side dry run, the HelmChart's valuesContent is
// rendered and the site it describes installed (no kubelet runs it), and
// the site's service accounts are checked with SubjectAccessReviews. A
// marked command the test does not know fails it, so the page and the
// test cannot drift apart silently.

const quickstartDoc = "../../docs/quickstart-k3s.md"

// quickstartTag stands for the build's tag (TAG on the page).
const quickstartTag = "quickstart"

// docCommand is one marked shell command (continuation lines joined).
type docCommand struct {
	line int
	args []string
}

// docBlock is one marked YAML block.
type docBlock struct {
	line int
	kind string
	text string
}

// parseQuickstart returns the page's marked commands and YAML blocks.
func parseQuickstart(t *testing.T) ([]docCommand, []docBlock) {
	t.Helper()
	f, err := os.Open(quickstartDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		cmds    []docCommand
		blocks  []docBlock
		fence   string // "", "sh" or "yaml"
		pending strings.Builder
		start   int
		block   *docBlock
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case fence == "" && strings.HasPrefix(line, "```"):
			fence = strings.TrimPrefix(line, "```")
			continue
		case fence != "" && line == "```":
			if block != nil {
				blocks = append(blocks, *block)
				block = nil
			}
			fence = ""
			continue
		}
		switch fence {
		case "sh":
			if pending.Len() == 0 {
				start = n
			}
			if cont, ok := strings.CutSuffix(line, "\\"); ok && !strings.Contains(line, "#") {
				pending.WriteString(cont + " ")
				continue
			}
			pending.WriteString(line)
			full := pending.String()
			pending.Reset()
			cmd, _, ok := strings.Cut(full, "# test")
			if !ok || strings.Contains(cmd, "#") {
				continue
			}
			args, err := shellWords(cmd)
			if err != nil {
				t.Fatalf("%s:%d: %v", quickstartDoc, start, err)
			}
			cmds = append(cmds, docCommand{line: start, args: args})
		case "yaml":
			if block == nil {
				if kind, ok := strings.CutPrefix(line, "# test: "); ok {
					block = &docBlock{line: n, kind: strings.TrimSpace(kind)}
				}
				continue
			}
			block.text += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds, blocks
}

// shellWords splits a command line as sh would for the quoting the page
// uses: double quotes (their content kept, $(...) left as text) and
// single quotes.
func shellWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// quickstartRun runs the page's commands in a directory with the keys the
// page creates (edgectl model keygen's files).
type quickstartRun struct {
	t      *testing.T
	ctx    context.Context
	cp     *ControlPlane
	a      *applier
	h      *helmCLI
	dir    string
	values string // stands for build/images/helm-values-airgap.yaml
}

func TestQuickstartK3s(t *testing.T) {
	cmds, blocks := parseQuickstart(t)
	if len(cmds) < 8 || len(blocks) < 2 {
		t.Fatalf("%s: %d marked commands and %d marked YAML blocks; the page marks at least 8 and 2", quickstartDoc, len(cmds), len(blocks))
	}
	h := findHelm(t)
	cp := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := &quickstartRun{t: t, ctx: ctx, cp: cp, a: newApplier(t, cp), h: h, dir: t.TempDir()}
	r.a.registerCRDs(ctx, t)
	keys := filepath.Join(r.dir, "keys")
	if err := os.MkdirAll(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"coordinator", "lab-1"} {
		if _, _, err := quant.WriteKeyPair(keys, name, e2eSigner(t, byte(40+i))); err != nil {
			t.Fatal(err)
		}
	}
	// What `make images` writes into helm-values-airgap.yaml, for images
	// tagged quickstartTag.
	sum := &ociimage.Summary{}
	for _, c := range ociimage.DefaultComponents("", "", "") {
		sum.Components = append(sum.Components, ociimage.ComponentSummary{Name: c.Name, Image: "ghcr.io/edgesched/" + c.Name + ":" + quickstartTag})
	}
	v, err := imagecmd.HelmValues(sum, false)
	if err != nil {
		t.Fatal(err)
	}
	r.values = filepath.Join(r.dir, "helm-values-airgap.yaml")
	if err := os.WriteFile(r.values, v, 0o644); err != nil {
		t.Fatal(err)
	}

	// helm-values.yaml (by digest) renders too, every edgesched
	// container by digest
	byDigest := &ociimage.Summary{}
	for i, c := range sum.Components {
		c.Digest = fmt.Sprintf("sha256:%064x", i+1)
		byDigest.Components = append(byDigest.Components, c)
	}
	if v, err = imagecmd.HelmValues(byDigest, true); err != nil {
		t.Fatal(err)
	}
	digestValues := filepath.Join(r.dir, "helm-values.yaml")
	if err := os.WriteFile(digestValues, v, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := h.run("template", "edgesched", "deploy/helm/edgesched", "--namespace", chartNamespace, "-f", digestValues,
		"--set", "cloud.enabled=true", "--set", "site.name=lab-1", "--set", "nats.leaf.enabled=true", "--set", "nats.leaf.remoteURL=nats-leaf://hub:7422")
	if err != nil {
		t.Fatalf("the chart does not render with helm-values.yaml: %v", err)
	}
	objs, err := parseObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	images := 0
	for _, o := range objs {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			img, _ := c.(map[string]any)["image"].(string)
			if !strings.HasPrefix(img, "ghcr.io/edgesched/") || !strings.Contains(img, "@sha256:") {
				t.Errorf("with helm-values.yaml %s/%s runs %q, want ghcr.io/edgesched/NAME@sha256:...", o.GetKind(), o.GetName(), img)
			}
			images++
		}
	}
	if images != 5 {
		t.Errorf("with helm-values.yaml %d containers, want 5 (agent, scheduler, leaf, hub, coordinator)", images)
	}

	for _, c := range cmds {
		t.Logf("%s:%d: %s", filepath.Base(quickstartDoc), c.line, strings.Join(c.args, " "))
		if err := r.run(c.args); err != nil {
			t.Errorf("%s:%d: %s: %v", quickstartDoc, c.line, strings.Join(c.args, " "), err)
		}
	}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s@%d", b.kind, b.line), func(t *testing.T) { r.block(t, b) })
	}
}

// run runs one marked command.
func (r *quickstartRun) run(args []string) error {
	switch {
	case len(args) == 4 && slices.Equal(args[:3], []string{"kubectl", "create", "namespace"}):
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: args[3]}}
		// the cloud and the site are two clusters on the page, one here
		if _, err := r.cp.Client.CoreV1().Namespaces().Create(r.ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	case len(args) >= 6 && args[0] == "kubectl" && args[1] == "-n" && args[3] == "create":
		return r.create(args[2], args[4:])
	case len(args) >= 3 && args[0] == "helm" && args[1] == "install":
		return r.helmInstall(args[2:])
	}
	return fmt.Errorf("the test does not know this command: run it or unmark it")
}

// create is `kubectl -n NS create configmap NAME ...` or `create secret
// generic NAME ...` with --from-file and --from-literal.
func (r *quickstartRun) create(ns string, args []string) error {
	var name string
	var rest []string
	switch {
	case args[0] == "configmap" && len(args) >= 2:
		name, rest = args[1], args[2:]
	case args[0] == "secret" && len(args) >= 3 && args[1] == "generic":
		name, rest = args[2], args[3:]
	default:
		return fmt.Errorf("unknown create %q", args[0])
	}
	data := map[string]string{}
	for _, a := range rest {
		switch {
		case strings.HasPrefix(a, "--from-file="):
			spec := strings.TrimPrefix(a, "--from-file=")
			key, path, ok := strings.Cut(spec, "=")
			if !ok {
				key, path = filepath.Base(spec), spec
			}
			b, err := os.ReadFile(filepath.Join(r.dir, path))
			if err != nil {
				return err
			}
			data[key] = string(b)
		case strings.HasPrefix(a, "--from-literal="):
			key, val, ok := strings.Cut(strings.TrimPrefix(a, "--from-literal="), "=")
			if !ok {
				return fmt.Errorf("%s: no KEY=VALUE", a)
			}
			data[key] = val
		default:
			return fmt.Errorf("unknown flag %q", a)
		}
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	var err error
	if args[0] == "configmap" {
		_, err = r.cp.Client.CoreV1().ConfigMaps(ns).Create(r.ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: data}, metav1.CreateOptions{})
	} else {
		_, err = r.cp.Client.CoreV1().Secrets(ns).Create(r.ctx, &corev1.Secret{ObjectMeta: meta, StringData: data}, metav1.CreateOptions{})
	}
	return err
}

// helmInstall renders `helm install RELEASE CHART -n NS ARGS...` with
// helm template and applies it with a server-side dry run; the images are
// the build's.
func (r *quickstartRun) helmInstall(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("helm install needs a release and a chart")
	}
	tmpl := []string{"template", args[0], args[1]}
	for i := 2; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-n" && i+1 < len(args):
			tmpl = append(tmpl, "--namespace", args[i+1])
			i++
		case a == "-f" && i+1 < len(args):
			f := args[i+1]
			if f != "build/images/helm-values-airgap.yaml" && f != "build/images/helm-values.yaml" {
				return fmt.Errorf("unknown values file %s", f)
			}
			tmpl = append(tmpl, "-f", r.values)
			i++
		case a == "--set" && i+1 < len(args):
			tmpl = append(tmpl, a, args[i+1])
			i++
		default:
			return fmt.Errorf("unknown helm install argument %q", a)
		}
	}
	out, err := r.h.run(tmpl...)
	if err != nil {
		return err
	}
	objs, err := parseObjects(out)
	if err != nil {
		return err
	}
	checkQuickstartImages(r.t, objs)
	for _, o := range objs {
		if err := r.a.apply(r.ctx, o, true); err != nil {
			return err
		}
	}
	r.t.Logf("helm install %s: %d objects accepted by a server-side dry run", args[0], len(objs))
	return nil
}

// checkQuickstartImages checks that every edgesched container runs the
// build's image by tag (the air-gapped values).
func checkQuickstartImages(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			img, _ := c.(map[string]any)["image"].(string)
			if strings.Contains(img, "edgesched/") && !strings.HasSuffix(img, ":"+quickstartTag) {
				t.Errorf("%s/%s runs %s, not the build's image (tag %s)", o.GetKind(), o.GetName(), img, quickstartTag)
			}
			if strings.HasPrefix(img, "nats:") {
				t.Errorf("%s/%s runs Docker Hub's %s: the air-gapped values must name the build's nats-server", o.GetKind(), o.GetName(), img)
			}
		}
	}
}

// block applies one marked YAML block; a HelmChart's valuesContent is
// also rendered and installed, and the site's RBAC checked.
func (r *quickstartRun) block(t *testing.T, b docBlock) {
	objs, err := parseObjects(strings.ReplaceAll(b.text, "TAG", quickstartTag))
	if err != nil || len(objs) != 1 || objs[0].GetKind() != b.kind {
		t.Fatalf("want one %s: %d objects, %v", b.kind, len(objs), err)
	}
	o := objs[0]
	if err := r.a.apply(r.ctx, o, true); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	switch b.kind {
	case "HelmChart":
		r.helmChart(t, o)
	case "Deployment":
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Spec.SchedulerName != "edgesched" {
			t.Errorf("the opt-in example has schedulerName %q, want the chart's edgesched", d.Spec.Template.Spec.SchedulerName)
		}
	}
}

func (r *quickstartRun) helmChart(t *testing.T, hc *unstructured.Unstructured) {
	ns, _, _ := unstructured.NestedString(hc.Object, "spec", "targetNamespace")
	values, _, _ := unstructured.NestedString(hc.Object, "spec", "valuesContent")
	vf := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vf, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := r.h.run("template", hc.GetName(), "deploy/helm/edgesched", "--namespace", ns, "-f", vf)
	if err != nil {
		t.Fatalf("the chart does not render with the page's valuesContent: %v", err)
	}
	objs, err := parseObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	checkQuickstartImages(t, objs)
	s := indexObjects(t, objs)
	for _, k := range []string{agentDS, schedDeploy, leafDeploy, siteLeaderRol} {
		if _, ok := s[k]; !ok {
			t.Errorf("the page's site lacks %s", k)
		}
	}
	if _, ok := s[coordSTS]; ok {
		t.Errorf("the page's site renders the coordinator")
	}
	// The page's fleet may mix in arm/v7 boards, whose archives hold the
	// agent alone: the scheduler and the build's nats-server (amd64 and
	// arm64 images) must only be placed on amd64 and arm64 nodes.
	for _, k := range []string{schedDeploy, leafDeploy} {
		if _, ok := s[k]; ok {
			checkPodArch(t, k, typed[appsv1.Deployment](t, s, k).Spec.Template.Spec, []string{"amd64", "arm64"})
		}
	}
	// install it (K3s's Helm controller would): every object stored
	r.a.applyAll(r.ctx, t, objs, false)
	checkAccess(r.ctx, t, r.cp, "edgesched-agent", []access{
		{"patch", "", "nodes", "", "node-1", true},
		{"update", "coordination.k8s.io", "leases", chartNamespace, "edgesched-site-lab-1", true},
		{"update", "", "configmaps", chartNamespace, "edgesched-model", true},
		{"get", "", "secrets", chartNamespace, "edgesched-site-key", false},
	})
	checkAccess(r.ctx, t, r.cp, "edgesched-scheduler", []access{
		{"create", "", "pods/binding", "default", "web-1", true},
		{"watch", "", "configmaps", chartNamespace, "edgesched-model", true},
		{"update", "", "configmaps", chartNamespace, "edgesched-model", false},
	})
	// the Secrets and ConfigMaps the page created are the ones the site mounts
	ds := typed[appsv1.DaemonSet](t, s, agentDS)
	for _, v := range ds.Spec.Template.Spec.Volumes {
		switch {
		case v.Secret != nil:
			if _, err := r.cp.Client.CoreV1().Secrets(ns).Get(r.ctx, v.Secret.SecretName, metav1.GetOptions{}); err != nil {
				t.Errorf("the agent mounts Secret %s, which the page does not create: %v", v.Secret.SecretName, err)
			}
		case v.ConfigMap != nil:
			if _, err := r.cp.Client.CoreV1().ConfigMaps(ns).Get(r.ctx, v.ConfigMap.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("the agent mounts ConfigMap %s, which the page does not create: %v", v.ConfigMap.Name, err)
			}
		}
	}
}

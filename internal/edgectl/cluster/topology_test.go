package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/kubefmt"
)

// TestTopology: a scenario's topology round-trips through from-scenario,
// check and configmap into a ConfigMap the plugin's decoder accepts; bad
// files and flags are refused with errors that name the problem.
func TestTopology(t *testing.T) {
	js, _, err := run(t, "topology", "from-scenario", "builtin:retail-fleet")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := kubefmt.DecodeTopology([]byte(strings.TrimSpace(js)))
	if err != nil {
		t.Fatalf("from-scenario wrote a topology the plugin refuses: %v\n%s", err, js)
	}
	// retail-fleet: three store zones, each on its own real grid, a window
	// as long as the trace (3 days: 72 hourly values; docs/scenario.md)
	if len(tp.Zones) != 3 || len(tp.CarbonZones) != 3 || len(tp.CarbonZones[0].GramsPerKWh) != 72 || tp.Network == nil {
		t.Fatalf("retail-fleet topology: %+v", tp)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "site.json")
	if err := os.WriteFile(path, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "topology", "check", path)
	if err != nil || !strings.HasPrefix(out, path+": ok: 3 zones, 3 carbon zones") || !strings.Contains(out, "carbon zone bpat: 72 hourly values") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if lines := strings.Count(js, "\n"); lines < 20 {
		t.Errorf("from-scenario wrote %d lines: want indented JSON to edit by hand", lines)
	}
	// the same topology as YAML is accepted too
	y, err := yaml.JSONToYAML([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	ypath := filepath.Join(dir, "site.yaml")
	if err := os.WriteFile(ypath, y, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, "topology", "check", ypath); err != nil || !strings.Contains(out, "carbon zone bpat: 72 hourly values") {
		t.Fatalf("check of the YAML file: %v\n%s", err, out)
	}
	// [NAMESPACE/]NAME, and --name, the deprecated name of the flag
	for _, tc := range []struct {
		args     []string
		ns, name string
		warn     bool
	}{
		{[]string{"--topology-configmap", "site-1/topo"}, "site-1", "topo", false},
		{[]string{"--topology-configmap", "topo", "-n", "site-2"}, "site-2", "topo", false},
		{[]string{"--name", "topo"}, "edgesched-system", "topo", true},
	} {
		out, errOut, err := run(t, append([]string{"topology", "configmap", ypath}, tc.args...)...)
		var cm corev1.ConfigMap
		if err != nil || yaml.Unmarshal([]byte(out), &cm) != nil || cm.Namespace != tc.ns || cm.Name != tc.name ||
			strings.Contains(errOut, "Flag --name has been deprecated, use --topology-configmap instead") != tc.warn {
			t.Fatalf("%v: %v: %s/%s\nstderr %q", tc.args, err, cm.Namespace, cm.Name, errOut)
		}
	}
	// without -n: the namespace the shipped config and the chart read
	out, _, err = run(t, "topology", "configmap", ypath)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal([]byte(out), &cm); err != nil {
		t.Fatalf("configmap output is not a ConfigMap: %v\n%s", err, out)
	}
	if cm.Kind != "ConfigMap" || cm.Namespace != "edgesched-system" || cm.Name != kubefmt.DefaultTopologyConfigMapName {
		t.Fatalf("ConfigMap %s %s/%s", cm.Kind, cm.Namespace, cm.Name)
	}
	back, err := kubefmt.DecodeTopology([]byte(cm.Data[kubefmt.TopologyConfigMapKey]))
	if err != nil || len(back.CarbonZones) != 3 {
		t.Fatalf("the ConfigMap's topology: %+v, %v", back, err)
	}

	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, []byte("\n  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version":1,"zones":[{"name":"a","carbonZone":"wind"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown carbon zone", []string{"topology", "check", bad}, bad + `: kubefmt: bad site topology: zones[0] (a): carbon zone "wind" is not in carbonZones`},
		{"configmap of a bad file", []string{"topology", "configmap", bad}, "is not in carbonZones"},
		{"missing file", []string{"topology", "check", filepath.Join(dir, "none.json")}, "read topology"},
		// an empty file was "kubefmt: bad site topology: EOF"
		{"empty file", []string{"topology", "check", empty}, empty + ": empty input, want a site topology (JSON or YAML)"},
		{"bad namespace", []string{"topology", "configmap", path, "-n", "Kube_System"}, `--topology-configmap: bad ConfigMap reference "edgesched-topology": namespace "Kube_System"`},
		{"bad name", []string{"topology", "configmap", path, "--topology-configmap", "a/b/c"}, `--topology-configmap: bad ConfigMap reference "a/b/c"`},
		{"bad name, old flag", []string{"topology", "configmap", path, "--name", "Topo_1"}, `bad ConfigMap reference "Topo_1": name "Topo_1"`},
		{"unknown scenario", []string{"topology", "from-scenario", "builtin:nope"}, "nope"},
		{"unknown flag", []string{"topology", "check", path, "--zone", "x"}, "unknown flag: --zone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: %v, want an error naming %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestTopologyNamespaceMatchesShippedConfig: `edgectl topology configmap`
// without -n writes the ConfigMap where the shipped scheduler config
// (deploy/edge-scheduler/scheduler-config.yaml) reads the topology, the
// dependency graph and (when enabled) the model.
func TestTopologyNamespaceMatchesShippedConfig(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/edge-scheduler/scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"topologyConfigMap: ", "dependenciesConfigMap: ", "modelConfigMap: "} {
		i := strings.Index(string(b), key)
		if i < 0 {
			t.Fatalf("scheduler-config.yaml has no %s", key)
		}
		ref := strings.Fields(string(b[i+len(key):]))[0]
		if ns, _, _ := strings.Cut(ref, "/"); ns != kubefmt.DefaultNamespace {
			t.Errorf("scheduler-config.yaml: %s%s, want namespace %s", key, ref, kubefmt.DefaultNamespace)
		}
	}
}

package e2e

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/kubefmt"
)

// topology checks the site topology's path through the real apiserver:
// the ConfigMap the shipped configuration names is read through the
// scheduler's RBAC and field-selected informer, its carbon zones are in
// use (pods still bind, now scored with the hour's intensities), a
// malformed update is refused with the last good topology kept, and
// deleting the ConfigMap restores the defaults. (What the features
// become is TestTopologyFeatures' business, on the same code.)
func (r *edgeRun) topology(ctx context.Context, ns string, args edgeplugin.Args) {
	r.t.Helper()
	cmNS, cmName, ok := strings.Cut(args.TopologyConfigMap, "/")
	if !ok {
		r.t.Fatalf("the shipped scheduler configuration's topologyConfigMap is %q, want NAMESPACE/NAME", args.TopologyConfigMap)
	}
	if err := CreateNamespace(ctx, r.cp.Client, ns); err != nil {
		r.t.Fatal(err)
	}
	zoneSet := map[string]bool{}
	for _, n := range r.nodes {
		if z := n.Labels[edgeplugin.LabelZone]; z != "" {
			zoneSet[z] = true
		}
	}
	zones := slices.Sorted(maps.Keys(zoneSet))
	if len(zones) < 2 {
		r.t.Fatalf("the e2e cluster has zones %v, want at least two", zones)
	}
	// the first zone on a grid with a daily curve, the others on a flat,
	// dirtier one; a slow link between the first two zones
	daily := make([]float64, 24)
	for h := range daily {
		daily[h] = float64(100 + 10*h)
	}
	tp := &kubefmt.Topology{Version: kubefmt.TopologyVersion,
		CarbonZones: []kubefmt.CarbonZone{{Name: "solar", GramsPerKWh: daily}, {Name: "coal", GramsPerKWh: []float64{900}}},
		Network:     &kubefmt.Network{IntraZoneMs: 0.5, InterZoneMs: 20, Pairs: []kubefmt.ZonePair{{A: zones[0], B: zones[1], Ms: 60}}}}
	for i, z := range zones {
		cz := "coal"
		if i == 0 {
			cz = "solar"
		}
		tp.Zones = append(tp.Zones, kubefmt.TopologyZone{Name: z, CarbonZone: cz})
	}
	raw, err := tp.Encode()
	if err != nil {
		r.t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cmNS, Name: cmName},
		Data: map[string]string{kubefmt.TopologyConfigMapKey: string(raw)}}
	if _, err := r.cp.Client.CoreV1().ConfigMaps(cmNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	r.waitMetric(ctx, "the site topology in use", func(m metrics) bool {
		return m.sum("edgesched_plugin_site_topology_carbon_zones") == 2 && m.sum("edgesched_plugin_site_topology_updates_total", `result="applied"`) >= 1
	})
	// scheduling goes on with the topology's environment and clock
	p := edgePod("topo-0", edgeShape{cpu: "500m", mem: "1Gi"})
	if _, err := r.cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	bound := r.waitBound(ctx, ns, p.Name)
	r.t.Logf("site topology %v in use (zone %s on the daily curve); topo-0 bound to %s", zones, zones[0], bound.Spec.NodeName)

	bad := cm.DeepCopy()
	bad.Data[kubefmt.TopologyConfigMapKey] = `{"version":1,"zones":[{"name":"` + zones[0] + `","carbonZone":"wind"}]}` // wind is not listed
	if _, err := r.cp.Client.CoreV1().ConfigMaps(cmNS).Update(ctx, bad, metav1.UpdateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	m := r.waitMetric(ctx, "the malformed topology refused", func(m metrics) bool {
		return m.sum("edgesched_plugin_site_topology_updates_total", `result="refused"`) >= 1
	})
	if c := m.sum("edgesched_plugin_site_topology_carbon_zones"); c != 2 {
		r.t.Fatalf("after a malformed topology: %v carbon zones in use, want the last good topology's 2", c)
	}
	if err := r.cp.Client.CoreV1().ConfigMaps(cmNS).Delete(ctx, cmName, metav1.DeleteOptions{}); err != nil {
		r.t.Fatal(err)
	}
	r.waitMetric(ctx, "the topology cleared", func(m metrics) bool {
		return m.sum("edgesched_plugin_site_topology_carbon_zones") == 0 && m.sum("edgesched_plugin_site_topology_updates_total", `result="cleared"`) >= 1
	})
}

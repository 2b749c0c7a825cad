//go:build unix

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// The chart's cloud side past one machine (issue 25; docs/deploy.md "The
// cloud side on a NATS cluster"): the value set "cloud-ha-regions" of
// TestDeployChart (a 3-server JetStream cluster, two coordinator replicas
// with --ha, two regional aggregators) and its refusals;
// TestDeployNATSCluster, which runs the rendered cluster configuration as
// three real servers; and TestDeployCloudRuns, which runs the rendered
// coordinator replicas and a region on that cluster.

// Names of the objects the HA value set adds.
const (
	natsPDB     = "PodDisruptionBudget/edgesched-nats"
	coordPDB    = "PodDisruptionBudget/edgesched-coordinator"
	regionsCM   = "ConfigMap/edgesched-regions"
	regionEUSTS = "StatefulSet/edgesched-region-eu"
	regionUSSTS = "StatefulSet/edgesched-region-us"
	regionEUCM  = "ConfigMap/edgesched-region-eu-sites"
)

// Sites of the HA value set: eu has two (inline keys), us one (its keys in
// a ConfigMap the operator makes, its name in siteNames), lab-1 sends to
// the root directly.
var (
	euSites = []string{"store-1", "store-2"}
	usSites = []string{"store-3"}
)

// cloudHAValueSet is the cloud side on a 3-server JetStream cluster with
// two coordinator replicas and two regions. Its values go into a file in
// t's temporary directory (lists and keys with dots are awkward in --set).
func cloudHAValueSet(t *testing.T, pub string) valueSet {
	t.Helper()
	keys := func(names ...string) map[string]any {
		m := map[string]any{}
		for _, n := range names {
			m[n+".pub"] = pub
		}
		return m
	}
	values := map[string]any{
		"site": map[string]any{"enabled": false},
		"cloud": map[string]any{
			"enabled": true,
			"nats":    map[string]any{"cluster": map[string]any{"replicas": 3, "authSecret": "nats-routes"}},
			"coordinator": map[string]any{
				"replicas": 2,
				"sites":    keys(append(append([]string{"lab-1"}, euSites...), usSites...)...),
				"ha":       map[string]any{"leaseTTL": "4s", "checkpointEvery": "20s"},
			},
			"regions": []any{
				map[string]any{"name": "eu", "regionServer": "nats://eu-hub.example.invalid:4222", "publicKey": pub,
					"sites": keys(euSites...), "nkeySecret": "eu-nkey"},
				map[string]any{"name": "us", "regionServer": "nats://us-hub.example.invalid:4222", "publicKey": pub,
					"sitesConfigMapName": "us-sites", "siteNames": usSites, "lead": "10s"},
			},
		},
	}
	b, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	vf := filepath.Join(t.TempDir(), "cloud-ha-regions.yaml")
	if err := os.WriteFile(vf, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return valueSet{
		name:   "cloud-ha-regions",
		args:   []string{"-f", vf},
		want:   []string{coordSTS, natsSTS, natsCM, natsPDB, coordPDB, regionsCM, regionEUSTS, regionUSSTS, regionEUCM, "Service/edgesched-nats-headless"},
		absent: []string{agentDS, "ConfigMap/edgesched-region-us-sites", "ConfigMap/us-sites"},
		notes:  "High availability: 2 replicas with --ha",
		check:  checkCloudHA,
	}
}

// checkCloudHA checks the HA value set's objects, and that every flag the
// coordinator's and the regions' containers pass is one the built
// edge-coordinator (and its region subcommand) lists.
func checkCloudHA(t *testing.T, s objSet) {
	// NATS: three servers, a cluster block routing to each by its name
	// under the headless Service, a PDB of one, spread over nodes.
	n := typed[appsv1.StatefulSet](t, s, natsSTS)
	if *n.Spec.Replicas != 3 {
		t.Errorf("NATS replicas %d, want 3", *n.Spec.Replicas)
	}
	conf, _, _ := unstructured.NestedString(s[natsCM].Object, "data", "nats.conf")
	for _, want := range []string{"cluster {", "name: edgesched", "port: 6222", "user: $ROUTE_USER", "$ROUTE_0", "$ROUTE_2", "no_advertise: true"} {
		if !strings.Contains(conf, want) {
			t.Errorf("clustered nats.conf lacks %q:\n%s", want, conf)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range container(t, n.Spec.Template.Spec, "nats").Env {
		env[e.Name] = e
	}
	for i := range 3 {
		want := fmt.Sprintf("nats://$(ROUTE_USER):$(ROUTE_PASSWORD)@edgesched-nats-%d.edgesched-nats-headless.%s.svc:6222", i, chartNamespace)
		if got := env[fmt.Sprintf("ROUTE_%d", i)].Value; got != want {
			t.Errorf("ROUTE_%d %q, want %q", i, got, want)
		}
	}
	if e := env["ROUTE_PASSWORD"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "nats-routes" {
		t.Errorf("ROUTE_PASSWORD %+v, want the Secret nats-routes", e)
	}
	checkSpread(t, n.Spec.Template.Spec, "nats")
	checkPDB(t, s, natsPDB, "nats")

	// The coordinator: two HA replicas on R3, the regions directory.
	c := typed[appsv1.StatefulSet](t, s, coordSTS)
	if *c.Spec.Replicas != 2 {
		t.Errorf("coordinator replicas %d, want 2", *c.Spec.Replicas)
	}
	cc := container(t, c.Spec.Template.Spec, "coordinator")
	servers := make([]string, 3)
	for i := range servers {
		servers[i] = fmt.Sprintf("nats://edgesched-nats-%d.edgesched-nats-headless.%s.svc:4222", i, chartNamespace)
	}
	for _, want := range []string{"--ha", "--replica-id=$(POD_NAME)", "--replicas=3", "--lease-ttl=4s", "--checkpoint-every=20s",
		"--regions=/etc/edgesched/regions", "--server=" + strings.Join(servers, ",")} {
		if !slices.Contains(cc.Args, want) {
			t.Errorf("coordinator args %q: missing %s", cc.Args, want)
		}
	}
	podName := false
	for _, e := range cc.Env {
		podName = podName || (e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name")
	}
	if !podName {
		t.Error("coordinator: POD_NAME (its --replica-id) is not the downward API's metadata.name")
	}
	if v := volumeByName(c.Spec.Template.Spec, "regions"); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "edgesched-regions" {
		t.Errorf("coordinator regions volume %+v, want the ConfigMap edgesched-regions", v)
	}
	checkSpread(t, c.Spec.Template.Spec, "coordinator")
	checkPDB(t, s, coordPDB, "coordinator")

	// The root's --regions directory as the pod sees it, read by the
	// root's own loader: each region's key, for exactly its sites.
	regions := loadConfigMapDir(t, s, regionsCM, federated.LoadRegions)
	for region, want := range map[string][]string{"eu": euSites, "us": usSites} {
		if got := regions.Sites(region); !slices.Equal(got, want) {
			t.Errorf("region %s: the root trusts its key for %v, want %v", region, got, want)
		}
	}
	if _, ok := regions.RegionOf("lab-1"); ok {
		t.Error("lab-1 sends directly, yet it is in a region")
	}
	// eu's sites ConfigMap is a registry the aggregator loads.
	if reg := loadConfigMapDir(t, s, regionEUCM, federated.LoadRegistry); !slices.Equal(reg.Sites(), euSites) {
		t.Errorf("region eu's sites ConfigMap registers %v, want %v", reg.Sites(), euSites)
	}

	// The regional aggregators.
	bin := buildLocal(t, coordinatorPkg)[0]
	root, sub := programFlags(t, bin), programFlags(t, bin, "region")
	checkFlags(t, "the coordinator", "edge-coordinator", cc.Args, root)
	for key, want := range map[string][]string{
		regionEUSTS: {"--region=eu", "--region-server=nats://eu-hub.example.invalid:4222", "--lead=30s", "--nkey=/etc/edgesched/nats-nkey/nats.nk",
			"--key=/etc/edgesched/region-key/region.key", "--sites=/etc/edgesched/sites", "--server=" + strings.Join(servers, ",")},
		regionUSSTS: {"--region=us", "--region-server=nats://us-hub.example.invalid:4222", "--lead=10s"},
	} {
		r := typed[appsv1.StatefulSet](t, s, key)
		if *r.Spec.Replicas != 1 || len(r.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("%s: replicas %d, PVC templates %d; want one of each (region.db has one writer)", key, *r.Spec.Replicas, len(r.Spec.VolumeClaimTemplates))
		}
		rc := container(t, r.Spec.Template.Spec, "region")
		if len(rc.Args) == 0 || rc.Args[0] != "region" {
			t.Fatalf("%s args %q: want the region subcommand first", key, rc.Args)
		}
		for _, a := range want {
			if !slices.Contains(rc.Args, a) {
				t.Errorf("%s args %q: missing %s", key, rc.Args, a)
			}
		}
		checkFlags(t, key, "edge-coordinator region", rc.Args[1:], sub)
	}
	if v := volumeByName(typed[appsv1.StatefulSet](t, s, regionUSSTS).Spec.Template.Spec, "sites"); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "us-sites" {
		t.Errorf("region us: sites volume %+v, want the operator's ConfigMap us-sites", v)
	}
}

// checkSpread checks the preference for distinct nodes of a component.
func checkSpread(t *testing.T, spec corev1.PodSpec, component string) {
	t.Helper()
	a := spec.Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("%s: affinity %+v, want one preferred pod anti-affinity", component, a)
		return
	}
	term := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if term.TopologyKey != "kubernetes.io/hostname" || term.LabelSelector == nil || term.LabelSelector.MatchLabels["app.kubernetes.io/component"] != component {
		t.Errorf("%s: anti-affinity term %+v, want its own pods by kubernetes.io/hostname", component, term)
	}
}

// checkPDB checks a PodDisruptionBudget of maxUnavailable 1 over a
// component's pods.
func checkPDB(t *testing.T, s objSet, key, component string) {
	t.Helper()
	p := typed[policyv1.PodDisruptionBudget](t, s, key)
	if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || p.Spec.Selector == nil ||
		p.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != component {
		t.Errorf("%s: %+v, want maxUnavailable 1 over the %s pods", key, p.Spec, component)
	}
}

// loadConfigMapDir writes a ConfigMap's entries as files, as its volume
// mounts them, and loads the directory with load.
func loadConfigMapDir[T any](t *testing.T, s objSet, key string, load func(string) (T, error)) T {
	t.Helper()
	out, err := load(writeConfigMapDir(t, s, key))
	if err != nil {
		t.Fatalf("%s as a directory: %v", key, err)
	}
	return out
}

// cloudRefusals are the cloud values the chart refuses, each with the
// message that says why.
func cloudRefusals() []refusal {
	region := func(i int, name string) []string {
		return []string{"--set", fmt.Sprintf("cloud.regions[%d].name=%s", i, name), "--set", fmt.Sprintf("cloud.regions[%d].regionServer=nats://hub.example.invalid:4222", i)}
	}
	cloud := func(args ...string) []string { return append([]string{"--set", "cloud.enabled=true"}, args...) }
	return []refusal{
		{"even NATS servers", cloud("--set", "cloud.nats.cluster.replicas=4"), "it must be 1, 3 or 5: JetStream's meta group"},
		{"two NATS servers", cloud("--set", "cloud.nats.cluster.replicas=2"), "(2 tolerate none"},
		{"more NATS servers than JetStream uses", cloud("--set", "cloud.nats.cluster.replicas=7"), "/cloud/nats/cluster/replicas"},
		{"stream replicas above the servers", cloud("--set", "cloud.coordinator.streamReplicas=3"), "JetStream places each replica on its own server"},
		{"region name", cloud(region(0, "EU_1")...), `name "EU_1" must be a DNS label`},
		{"region twice", cloud(append(region(0, "eu"), region(1, "eu")...)...), `region "eu" is listed twice`},
		{"region without its NATS server", cloud("--set", "cloud.regions[0].name=eu"), "regionServer"},
		{"region name too long", cloud(region(0, strings.Repeat("r", 40))...), "longer than 52 characters"},
		{"site in two regions", cloud(append(append(region(0, "eu"), region(1, "us")...),
			"--set", "cloud.regions[0].siteNames[0]=store-1", "--set", "cloud.regions[1].siteNames[0]=store-1")...), `site "store-1" is in regions "eu" and "us"`},
		{"site twice in a region", cloud(append(region(0, "eu"), "--set", "cloud.regions[0].siteNames[0]=store-1", "--set", "cloud.regions[0].siteNames[1]=store-1")...),
			"at '/cloud/regions/0/siteNames': items at 0 and 1 are equal"},
		{"regional site the root does not register", cloud(append(region(0, "eu"), "--set", "cloud.coordinator.sites.lab-1\\.pub=k",
			"--set", "cloud.regions[0].siteNames[0]=store-1")...), `site "store-1" of region "eu" is not in cloud.coordinator.sites`},
		{"some regions with keys", cloud(append(append(region(0, "eu"), region(1, "us")...), "--set", "cloud.regions[0].publicKey=k",
			"--set", "cloud.regions[0].siteNames[0]=store-1")...), "set publicKey on every region"},
		{"region key without site names", cloud(append(region(0, "eu"), "--set", "cloud.regions[0].publicKey=k")...), `region "eu" has neither sites nor siteNames`},
	}
}

// routeUser and routePassword are the route credentials the test's pods
// take from their Secret (URL-safe, as docs/deploy.md asks).
const routeUser, routePassword = "edgesched-route", "r0ute-s3cret"

// TestDeployNATSCluster renders the chart's 3-server configuration (with
// and without route credentials), parses each pod's nats.conf with
// nats-server's own parser and that pod's environment (POD_NAME, the
// route URLs the pod spec composes), moves only the listeners and the
// route hosts onto loopback, and starts the three as real servers: they
// route to each other, elect a JetStream meta leader, and an R3 stream
// takes a message written on one server and read on another.
func TestDeployNATSCluster(t *testing.T) {
	h := findHelm(t)
	for _, tc := range []struct {
		name string
		args []string
		auth bool
	}{
		{"routes-with-credentials", []string{"--set", "cloud.nats.cluster.authSecret=nats-routes"}, true},
		{"routes-without-credentials", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := h.render(t, append([]string{"--set", "cloud.enabled=true", "--set", "cloud.nats.cluster.replicas=3"}, tc.args...)...)
			conf, _, _ := unstructured.NestedString(s[natsCM].Object, "data", "nats.conf")
			sts := typed[appsv1.StatefulSet](t, s, natsSTS)
			servers := startNATSCluster(t, conf, container(t, sts.Spec.Template.Spec, "nats").Env, int(*sts.Spec.Replicas), tc.auth)
			checkR3Stream(t, servers)
		})
	}
}

// podEnv is the environment of pod name as the kubelet builds it from
// the container's env: fieldRef metadata.name, the route Secret's keys,
// and $(VAR) references to variables defined before.
func podEnv(t *testing.T, env []corev1.EnvVar, pod string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = ref.ReplaceAllStringFunc(e.Value, func(m string) string {
				if v, ok := out[m[2:len(m)-1]]; ok {
					return v
				}
				return m // the kubelet leaves unknown references as they are
			})
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			out[e.Name] = pod
		case e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == "user":
			out[e.Name] = routeUser
		case e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == "password":
			out[e.Name] = routePassword
		case e.ValueFrom.ResourceFieldRef != nil:
		default:
			t.Fatalf("env %s: a source this test does not emulate: %+v", e.Name, e.ValueFrom)
		}
	}
	return out
}

// startNATSCluster starts the three servers of a rendered configuration
// and returns them, in pod order, once they are routed and a JetStream
// meta leader is elected (every server current with it); auth: routes
// must present the route credentials.
func startNATSCluster(t *testing.T, conf string, env []corev1.EnvVar, replicas int, auth bool) []*server.Server {
	if replicas != 3 {
		t.Fatalf("the StatefulSet runs %d servers, want 3", replicas)
	}
	// The cluster ports come from FreePort and are written into every
	// server's routes before any listens, so another test can take one
	// in between: a server that is not ready is retried, with new ports,
	// at most three times.
	var servers []*server.Server
	var err error
	for attempt := 1; ; attempt++ {
		if servers, err = tryNATSCluster(t, conf, env, replicas, auth); err == nil {
			break
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; again with new ports", attempt, err)
	}
	awaitNATSCluster(t, servers)
	return servers
}

// tryNATSCluster parses each pod's options, gives the servers loopback
// cluster ports and starts them (not yet routed).
func tryNATSCluster(t *testing.T, conf string, env []corev1.EnvVar, replicas int, auth bool) ([]*server.Server, error) {
	// Each pod's options, parsed with its own environment.
	ports := map[string]int{} // route host -> loopback cluster port
	opts := make([]*server.Options, replicas)
	for i := range opts {
		pod := fmt.Sprintf("edgesched-nats-%d", i)
		for k, v := range podEnv(t, env, pod) {
			t.Setenv(k, v)
		}
		o := parseNATSConfig(t, conf)
		if o.ServerName != pod || !o.JetStream || o.Cluster.Name != "edgesched" || o.Cluster.Port != 6222 || len(o.Routes) != replicas {
			t.Fatalf("pod %s: server_name %q, JetStream %v, cluster %q port %d, %d routes; want its pod name, JetStream, cluster edgesched on 6222, %d routes",
				pod, o.ServerName, o.JetStream, o.Cluster.Name, o.Cluster.Port, len(o.Routes), replicas)
		}
		if hasAuth := o.Cluster.Username == routeUser && o.Cluster.Password == routePassword; hasAuth != auth {
			t.Fatalf("pod %s: route authorization user %q, want the Secret's: %v", pod, o.Cluster.Username, auth)
		}
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[fmt.Sprintf("%s.edgesched-nats-headless.%s.svc", pod, chartNamespace)] = port
		opts[i] = o
	}
	dir := t.TempDir()
	for i, o := range opts {
		for _, r := range o.Routes {
			port, ok := ports[r.Hostname()]
			if !ok || r.Port() != "6222" {
				t.Fatalf("route %s names no pod of the StatefulSet on the cluster port", r.Redacted())
			}
			if auth && r.User.String() != url.UserPassword(routeUser, routePassword).String() {
				t.Fatalf("route %s does not carry the route credentials", r.Redacted())
			}
			r.Host = fmt.Sprintf("127.0.0.1:%d", port)
		}
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", ports[fmt.Sprintf("edgesched-nats-%d.edgesched-nats-headless.%s.svc", i, chartNamespace)]
		o.Host, o.Port = "127.0.0.1", -1
		o.HTTPHost, o.HTTPPort = "127.0.0.1", -1
		o.LeafNode.Host, o.LeafNode.Port = "127.0.0.1", -1
		o.StoreDir = filepath.Join(dir, o.ServerName, "jetstream")
		o.PidFile = filepath.Join(dir, o.ServerName+".pid")
		o.NoSigs = true
	}
	servers := make([]*server.Server, len(opts))
	for i, o := range opts {
		s, err := tryStartNATS(t, o)
		if err != nil {
			for _, up := range servers[:i] {
				up.Shutdown()
			}
			return nil, err
		}
		servers[i] = s
	}
	return servers, nil
}

// awaitNATSCluster waits until the servers are routed and a JetStream
// meta leader is elected, every server current with it, and checks each
// readiness probe.
func awaitNATSCluster(t *testing.T, servers []*server.Server) {
	t.Helper()
	// Routes up and a meta leader elected, every server current with it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	var leader string
	for {
		routed, current := true, true
		leader = ""
		for _, s := range servers {
			routed = routed && s.NumRoutes() >= len(servers)-1
			current = current && s.JetStreamIsCurrent()
			if s.JetStreamIsLeader() {
				leader = s.Name()
			}
		}
		if routed && current && leader != "" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no JetStream cluster: routed %v, current %v, meta leader %q", routed, current, leader)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("3 servers routed (cluster %s), meta leader %s elected %s after start", servers[0].ClusterName(), leader, time.Since(start).Round(time.Millisecond))
	for _, s := range servers {
		resp, err := http.Get(fmt.Sprintf("http://%s/healthz", s.MonitorAddr()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s /healthz (the readiness probe): %s", s.Name(), resp.Status)
		}
	}
}

// checkR3Stream creates an R3 stream through the first server, writes a
// message through the second and reads it through the third.
func checkR3Stream(t *testing.T, servers []*server.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// An R3 stream created through server 0, written through server 1,
	// read through server 2.
	js0, js1, js2 := jsClient(t, servers[0].ClientURL()), jsClient(t, servers[1].ClientURL()), jsClient(t, servers[2].ClientURL())
	var info *jetstream.StreamInfo
	retryUntil(ctx, t, "create an R3 stream", func() error {
		st, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "EDGESCHED_UPDATES", Subjects: []string{"edgesched.update.>"},
			Storage: jetstream.FileStorage, Replicas: 3})
		if err == nil {
			info, err = st.Info(ctx)
		}
		return err
	})
	if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster %+v, want a leader and 2 more replicas", info.Cluster)
	}
	msg := nats.NewMsg("edgesched.update.lab-1")
	msg.Data = []byte("update 1")
	msg.Header.Set(nats.MsgIdHdr, "lab-1:1")
	ack, err := js1.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatalf("publish through %s: %v", servers[1].Name(), err)
	}
	st, err := js2.Stream(ctx, "EDGESCHED_UPDATES")
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatalf("read through %s: %v", servers[2].Name(), err)
	}
	if string(got.Data) != "update 1" || got.Subject != "edgesched.update.lab-1" {
		t.Errorf("read %q on %s, want the update published", got.Data, got.Subject)
	}
	t.Logf("R3 stream led by %s with replicas on %s and %s; a message written through %s read through %s",
		info.Cluster.Leader, info.Cluster.Replicas[0].Name, info.Cluster.Replicas[1].Name, servers[1].Name(), servers[2].Name())
}

// TestDeployCloudRuns runs the cloud side as the chart renders it for a
// 3-server cluster, two coordinator replicas and region eu, with only
// what a test machine must change: the NATS cluster from the rendered
// configuration (TestDeployNATSCluster's), edge-coordinator twice and
// `edge-coordinator region` once, each with the chart's container args but
// for addresses and paths (the NATS URLs onto loopback, the mounted
// ConfigMaps and Secrets as files in a temporary directory; the region's
// hub an embedded JetStream server), plus a small initial model so the
// bootstrap is quick. One replica becomes active and the other stays
// standby; the region creates its update stream on its hub and follows the
// root; the active killed with SIGKILL, the standby takes over.
func TestDeployCloudRuns(t *testing.T) {
	h := findHelm(t)
	bin := buildLocal(t, coordinatorPkg)[0]
	dir, keyDir := t.TempDir(), t.TempDir()
	pubOf := func(name string, seed byte) (key, pub string) {
		k, p, err := quant.WriteKeyPair(keyDir, name, e2eSigner(t, seed))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return k, string(b)
	}
	coordKey, _ := pubOf("coordinator", 11)
	euKey, euPub := pubOf("eu", 12)
	_, store1 := pubOf("store-1", 13)
	_, lab1 := pubOf("lab-1", 14)
	values, err := yaml.Marshal(map[string]any{
		"site": map[string]any{"enabled": false},
		"cloud": map[string]any{
			"enabled": true,
			"nats":    map[string]any{"cluster": map[string]any{"replicas": 3, "authSecret": "nats-routes"}},
			"coordinator": map[string]any{"replicas": 2,
				"sites": map[string]any{"store-1.pub": store1, "lab-1.pub": lab1}},
			"regions": []any{map[string]any{"name": "eu", "regionServer": "nats://eu-hub.example.invalid:4222", "publicKey": euPub,
				"sites": map[string]any{"store-1.pub": store1}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	vf := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(vf, values, 0o600); err != nil {
		t.Fatal(err)
	}
	_, s := h.render(t, "-f", vf)

	sts := typed[appsv1.StatefulSet](t, s, natsSTS)
	conf, _, _ := unstructured.NestedString(s[natsCM].Object, "data", "nats.conf")
	servers := startNATSCluster(t, conf, container(t, sts.Spec.Template.Spec, "nats").Env, int(*sts.Spec.Replicas), true)
	urls := make([]string, len(servers))
	for i, srv := range servers {
		urls[i] = srv.ClientURL()
	}
	hub := startNATS(t, &server.Options{ServerName: "eu-hub", Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(dir, "eu-hub"), NoSigs: true})
	model := filepath.Join(dir, "start.esm")
	if err := nn.WriteFile(model, fltest.SmallModel(t, 1), "model", nil, nil); err != nil {
		t.Fatal(err)
	}

	// The coordinator replicas.
	coord := typed[appsv1.StatefulSet](t, s, coordSTS)
	cargs := container(t, coord.Spec.Template.Spec, "coordinator").Args
	sitesDir, regionsDir := writeConfigMapDir(t, s, "ConfigMap/edgesched-sites"), writeConfigMapDir(t, s, regionsCM)
	type replica struct {
		p       *Process
		metrics string
	}
	replicas := make([]replica, *coord.Spec.Replicas)
	for i := range replicas {
		pod := fmt.Sprintf("edgesched-coordinator-%d", i)
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		args := localArgs(t, cargs, pod, map[string]string{
			"server": strings.Join(urls, ","), "data": filepath.Join(dir, pod), "key": coordKey, "sites": sitesDir,
			"regions": regionsDir, "metrics-addr": fmt.Sprintf("127.0.0.1:%d", port),
		})
		args = append(args, "--model", model, "--calibrate", "builtin:factory-vision")
		p, err := StartProcess(t, dir, pod, 0, bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = replica{p, fmt.Sprintf("http://127.0.0.1:%d/metrics", port)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	active := func() (act []int, err error) {
		for i, r := range replicas {
			if ok, _ := r.p.Exited(); ok {
				continue
			}
			m, err := scrapeMetrics(ctx, r.metrics, "")
			if err != nil {
				return nil, err
			}
			if m.sum("edgesched_coordinator_active") == 1 {
				act = append(act, i)
			}
		}
		return act, nil
	}
	waitActive := func(what string, alive int) (int, time.Duration) {
		t.Helper()
		start := time.Now()
		for {
			act, err := active()
			if err == nil && len(act) == 1 && (alive < 0 || act[0] == alive) {
				return act[0], time.Since(start)
			}
			if len(act) > 1 {
				t.Fatalf("%d replicas active at once: %v", len(act), act)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: active replicas %v (%v)", what, act, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	first, took := waitActive("one replica active", -1)
	for i, r := range replicas {
		if exited, err := r.p.Exited(); exited {
			t.Fatalf("replica %d exited (%v):\n%s", i, err, r.p.LogTail(4096))
		}
	}
	t.Logf("replica %d active %s after start, the other standby", first, took.Round(time.Millisecond))

	// Region eu with the chart's args: its stream and consumer on its hub.
	reg := typed[appsv1.StatefulSet](t, s, regionEUSTS)
	rargs := localArgs(t, container(t, reg.Spec.Template.Spec, "region").Args, "edgesched-region-eu-0", map[string]string{
		"server": strings.Join(urls, ","), "region-server": hub.ClientURL(), "data": filepath.Join(dir, "region-eu"),
		"key": euKey, "sites": writeConfigMapDir(t, s, regionEUCM),
	})
	region, err := StartProcess(t, dir, "region-eu", 0, bin, rargs...)
	if err != nil {
		t.Fatal(err)
	}
	hjs := jsClient(t, hub.ClientURL())
	retryUntil(ctx, t, "region eu's update stream and consumer on its hub", func() error {
		st, err := hjs.Stream(ctx, federated.RegionUpdateStream("eu"))
		if err == nil {
			_, err = st.Consumer(ctx, federated.RegionConsumer)
		}
		return err
	})

	// Failover: the active killed, the standby takes over.
	if err := replicas[first].p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	next, took := waitActive("the standby takes over", 1-first)
	if exited, err := region.Exited(); exited {
		t.Fatalf("region eu exited (%v):\n%s", err, region.LogTail(4096))
	}
	// The new active serves: a round announced in the state bucket, on
	// the cluster's R3 bucket.
	cjs := jsClient(t, strings.Join(urls, ","))
	var replicasOfState int
	retryUntil(ctx, t, "a round announced after the takeover", func() error {
		kv, err := cjs.KeyValue(ctx, federated.StateBucket)
		if err != nil {
			return err
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return err
		}
		replicasOfState = st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas
		_, err = kv.Get(ctx, federated.KeyRound)
		return err
	})
	if want := flagValue(cargs, "replicas"); fmt.Sprint(replicasOfState) != want {
		t.Errorf("the state bucket has %d replicas, want the chart's --replicas=%s", replicasOfState, want)
	}
	t.Logf("replica %d killed (SIGKILL); replica %d active %s later (lease TTL %s) and announced a round in the R%d state bucket; region eu's stream and consumer on its hub", first, next,
		took.Round(time.Millisecond), flagValue(cargs, "lease-ttl"), replicasOfState)
}

// localArgs rewrites a container's args for a process on this machine:
// each flag of set gets the given value (every one must be among args),
// and $(POD_NAME) is pod.
func localArgs(t *testing.T, args []string, pod string, set map[string]string) []string {
	t.Helper()
	out := make([]string, len(args))
	seen := map[string]bool{}
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "$(POD_NAME)", pod)
		if n := flagName(a); n != "" {
			if v, ok := set[n]; ok {
				out[i], seen[n] = "--"+n+"="+v, true
			}
		}
	}
	for n := range set {
		if !seen[n] {
			t.Fatalf("the chart does not pass --%s (args %q)", n, args)
		}
	}
	return out
}

// flagValue is the value of --name=value among args ("" if absent).
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// writeConfigMapDir writes a ConfigMap's entries as files, as its volume
// mounts them, and returns the directory.
func writeConfigMapDir(t *testing.T, s objSet, key string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range typed[corev1.ConfigMap](t, s, key).Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// jsClient connects to url (closed when t ends) for JetStream.
func jsClient(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// retryUntil calls f every 200 ms until it succeeds, failing t with its
// last error when ctx ends.
func retryUntil(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

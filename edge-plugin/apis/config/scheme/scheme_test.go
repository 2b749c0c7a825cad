package scheme

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubescheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"sigs.k8s.io/randfill"

	"github.com/edgesched/edgesched/edge-plugin/apis/config"
	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
)

// profile is a KubeSchedulerConfiguration with one profile enabling
// EdgePolicy, pluginConfig appended.
const profile = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: edge-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: EdgePolicy
`

// decode reads a configuration as kube-scheduler does
// (cmd/kube-scheduler/app/options.LoadConfigFromFile: the scheme's
// strict universal decoder, which defaults and converts to internal).
func decode(t *testing.T, yaml string) (*kubeconfig.KubeSchedulerConfiguration, error) {
	t.Helper()
	obj, _, err := kubescheme.Codecs.UniversalDecoder().Decode([]byte(yaml), nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*kubeconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	return cfg, nil
}

// edgeArgs is the EdgePolicy plugin config of cfg's only profile.
func edgeArgs(t *testing.T, cfg *kubeconfig.KubeSchedulerConfiguration) runtime.Object {
	t.Helper()
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == "EdgePolicy" {
			return pc.Args
		}
	}
	t.Fatal("no EdgePolicy plugin config")
	return nil
}

// TestKubeSchedulerDecodesArgs: with the package imported, kube-scheduler
// decodes EdgePolicy's args to the internal type and applies the v1
// defaults (the documented ones: 10s reload, openb:default at 0.95, 2m
// telemetry age, model.esa with a ConfigMap source), keeps what is set,
// refuses unknown fields and a wrong kind, and gives an enabled plugin
// without args defaulted args of its own.
func TestKubeSchedulerDecodesArgs(t *testing.T) {
	if Scheme != kubescheme.Scheme {
		t.Fatal("Scheme is not kube-scheduler's")
	}
	cfg, err := decode(t, profile+`  pluginConfig:
  - name: EdgePolicy
    args:
      modelConfigMap: kube-system/model
      modelKeys: [/keys/a.pub]
      modelMaxAge: 48h
      targetThreshold: 0.9
      publicKeys: [/keys/old.pub]
`)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := edgeArgs(t, cfg).(*config.EdgePolicyArgs)
	if !ok {
		t.Fatalf("args are a %T, not the internal EdgePolicyArgs", edgeArgs(t, cfg))
	}
	if a.ModelConfigMap != "kube-system/model" || a.ModelConfigMapKey != configv1.DefaultModelConfigMapKey ||
		len(a.ModelKeys) != 1 || len(a.PublicKeys) != 1 || a.ModelMaxAge.Duration != 48*time.Hour ||
		a.ReloadInterval.Duration != configv1.DefaultReloadInterval || a.TelemetryMaxAge.Duration != configv1.DefaultTelemetryMaxAge ||
		*a.TargetThreshold != 0.9 || a.TargetWorkload != configv1.DefaultTargetWorkload {
		t.Errorf("decoded args %+v", a)
	}

	cfg, err = decode(t, profile)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := edgeArgs(t, cfg).(*config.EdgePolicyArgs)
	if !ok || d.ReloadInterval == nil || d.ReloadInterval.Duration != configv1.DefaultReloadInterval || len(d.ModelKeys) != 0 {
		t.Errorf("an enabled plugin without args got %#v, want defaulted args (still without keys)", edgeArgs(t, cfg))
	}

	for _, tc := range []struct{ name, args, want string }{
		{"unknown field", "      modelPath: m\n      modelKey: [k]\n", `unknown field "modelKey"`},
		{"wrong kind", "      kind: NodeResourcesFitArgs\n      apiVersion: kubescheduler.config.k8s.io/v1\n", "were not of type"},
		{"bad duration", "      reloadInterval: soon\n", "invalid duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(t, profile+"  pluginConfig:\n  - name: EdgePolicy\n    args:\n"+tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestConversionRoundTrip: v1 → internal → v1 keeps every field (the
// plugin validates the v1 form of what kube-scheduler hands it), on
// randomly filled args, and the scheme converts both ways.
func TestConversionRoundTrip(t *testing.T) {
	f := randfill.NewWithSeed(7).NilChance(0.3).NumElements(0, 3).Funcs(
		func(d *metav1.Duration, c randfill.Continue) { d.Duration = time.Duration(c.Int63n(int64(time.Hour))) },
		func(tm *metav1.TypeMeta, c randfill.Continue) {},
	)
	for i := range 200 {
		var in configv1.EdgePolicyArgs
		f.Fill(&in)
		obj, err := Scheme.ConvertToVersion(in.DeepCopy(), config.SchemeGroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		internal, ok := obj.(*config.EdgePolicyArgs)
		if !ok {
			t.Fatalf("converted to %T", obj)
		}
		back, err := Scheme.ConvertToVersion(internal, configv1.SchemeGroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		out := back.(*configv1.EdgePolicyArgs)
		out.TypeMeta = metav1.TypeMeta{}
		if !equality(&in, out) {
			t.Fatalf("case %d: %+v became %+v", i, in, *out)
		}
	}
}

// equality compares two args field by field through their JSON form.
func equality(a, b *configv1.EdgePolicyArgs) bool {
	ja, ea := json.Marshal(a)
	jb, eb := json.Marshal(b)
	return ea == nil && eb == nil && string(ja) == string(jb)
}

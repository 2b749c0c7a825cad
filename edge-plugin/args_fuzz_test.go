package edgeplugin

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgesched/edgesched/edge-plugin/apis/config"
	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
)

// realArgs are EdgePolicy's args as the shipped KubeSchedulerConfigurations
// give them (deploy/edge-scheduler/scheduler-config.yaml and the helm
// chart's, rendered in deploy/manifests/site.yaml), YAML as in those files.
var realArgs = []string{
	`modelPath: /var/lib/edgesched/model/policy.esa
modelKeys:
  - /etc/edgesched/keys/coordinator.pub
reloadInterval: 10s
targetWorkload: openb:default
targetThreshold: 0.95
dependenciesConfigMap: edgesched-system/edgesched-dependencies
topologyConfigMap: edgesched-system/edgesched-topology
policyConfigMap: edgesched-system/edgesched-policy
`,
	`modelConfigMap: edgesched-system/edgesched-model
modelConfigMapKey: model.esa
modelKeys:
  - /etc/edgesched/trusted-keys
targetWorkload: "openb:default"
targetThreshold: 0.95
telemetryMaxAge: 2m
dependenciesConfigMap: edgesched-system/edgesched-dependencies
topologyConfigMap: edgesched-system/edgesched-topology
policyConfigMap: edgesched-system/edgesched-policy
modelStatePath: /var/lib/edgesched-scheduler/plugin-state.db
`,
}

// FuzzDecodeArgs: no args document (JSON or YAML, as a *runtime.Unknown
// holds it) makes DecodeArgs panic; a refusal returns nothing and wraps
// ErrArgs; accepted args are defaulted and valid, and decode to the same
// args again from their JSON, from themselves (*Args) and (but for
// apiVersion and kind) from the internal type kube-scheduler hands over
// (*config.EdgePolicyArgs).
// Seeded with the shipped configurations' args, as YAML and as JSON.
func FuzzDecodeArgs(f *testing.F) {
	for _, y := range realArgs {
		f.Add([]byte(y), true)
		a, err := DecodeArgs(&runtime.Unknown{Raw: []byte(y), ContentType: runtime.ContentTypeYAML})
		if err != nil {
			f.Fatalf("shipped args: %v", err)
		}
		j, err := json.Marshal(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j, false)
	}
	f.Add([]byte(`{"modelPath":"m","modelKeys":["k"],"modelMaxAge":"720h","apiVersion":"kubescheduler.config.k8s.io/v1","kind":"EdgePolicyArgs"}`), false)
	f.Add([]byte(`{"modelPath":"m","publicKeys":["k"]}`), false)
	f.Add([]byte(`{"modelPath":"m","modelKeys":["k"],"reloadInterval":"ten seconds"}`), false)
	f.Add([]byte("modelPath: m\nmodelKeys: [k]\nmodelKeys: [j]\n"), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, raw []byte, isYAML bool) {
		ct := runtime.ContentTypeJSON
		if isYAML {
			ct = runtime.ContentTypeYAML
		}
		a, err := DecodeArgs(&runtime.Unknown{Raw: raw, ContentType: ct})
		if err != nil {
			if a != nil || !errors.Is(err, ErrArgs) {
				t.Fatalf("refusal %v (args %+v) does not wrap ErrArgs or returned args", err, a)
			}
			return
		}
		if err := configv1.ValidateEdgePolicyArgs(nil, a); err != nil || a.ReloadInterval == nil || a.TelemetryMaxAge == nil || a.TargetThreshold == nil {
			t.Fatalf("accepted args %+v are not defaulted and valid: %v", a, err)
		}
		j, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("accepted args do not encode: %v", err)
		}
		back, err := DecodeArgs(&runtime.Unknown{Raw: j, ContentType: runtime.ContentTypeJSON})
		if err != nil {
			t.Fatalf("re-encoded args %s refused: %v", j, err)
		}
		if !reflect.DeepEqual(back, a) {
			t.Fatalf("round trip through JSON: %+v, decoded %+v", back, a)
		}
		if self, err := DecodeArgs(a); err != nil || !reflect.DeepEqual(self, a) {
			t.Fatalf("DecodeArgs of the decoded args: %+v, %v", self, err)
		}
		var internal config.EdgePolicyArgs
		if err := configv1.Convert_v1_EdgePolicyArgs_To_config_EdgePolicyArgs(a, &internal, nil); err != nil {
			t.Fatalf("convert to the internal type: %v", err)
		}
		// (the internal type has no apiVersion and kind: they are the
		// scheme's, not the args')
		want := a.DeepCopy()
		want.APIVersion, want.Kind = "", ""
		if conv, err := DecodeArgs(&internal); err != nil || !reflect.DeepEqual(conv, want) {
			t.Fatalf("DecodeArgs of the internal args: %+v (want %+v), %v", conv, want, err)
		}
	})
}

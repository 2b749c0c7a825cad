package v1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestValidateEdgePolicyArgs decodes args as a scheduler configuration
// writes them (YAML), defaults and validates them: each refusal names the
// field's path and what is wrong, and several problems are all reported.
func TestValidateEdgePolicyArgs(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string // substrings of the error ("" none: valid)
	}{
		{"file model", "modelPath: /m.esa\nmodelKeys: [/k.pub]", nil},
		{"ConfigMap model", "modelConfigMap: ns/model\nmodelKeys: [/k]", nil},
		{"typed", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: EdgePolicyArgs\nmodelPath: m\nmodelKeys: [k]", nil},
		{"no model", "modelKeys: [k]", []string{"modelPath: Required value: a model source is required"}},
		{"two models", "modelPath: m\nmodelConfigMap: ns/x\nmodelKeys: [k]", []string{"modelConfigMap: Forbidden: modelPath and modelConfigMap are mutually exclusive"}},
		{"key without ConfigMap", "modelPath: m\nmodelConfigMapKey: a\nmodelKeys: [k]", []string{"modelConfigMapKey: Forbidden"}},
		{"bad ConfigMap key", "modelConfigMap: ns/x\nmodelConfigMapKey: a/b\nmodelKeys: [k]", []string{"modelConfigMapKey: Invalid value: \"a/b\""}},
		{"no keys", "modelPath: m", []string{"modelKeys: Required value: at least one key file"}},
		{"empty key", "modelPath: m\nmodelKeys: [k, '']", []string{"modelKeys[1]: Required value"}},
		{"both key names", "modelPath: m\nmodelKeys: [k]\npublicKeys: [k]", []string{"publicKeys: Forbidden: publicKeys is the deprecated name of modelKeys"}},
		{"bad refs", "modelPath: m\nmodelKeys: [k]\ndependenciesConfigMap: deps\ntopologyConfigMap: NS/t\npolicyConfigMap: a/b/c",
			[]string{`dependenciesConfigMap: Invalid value: "deps": must be namespace/name`, `topologyConfigMap: Invalid value: "NS/t": namespace:`, `policyConfigMap: Invalid value: "a/b/c"`}},
		// bounds: reloadInterval 1s..1h, modelMaxAge 1m..8760h,
		// telemetryMaxAge 10s..1h, targetThreshold (0, 1]
		{"durations", "modelPath: m\nmodelKeys: [k]\nreloadInterval: 500ms\nmodelMaxAge: 9000h\ntelemetryMaxAge: 9s",
			[]string{`reloadInterval: Invalid value: "500ms": must be between 1s and 1h0m0s`, `modelMaxAge: Invalid value: "9000h0m0s"`, `telemetryMaxAge: Invalid value: "9s"`}},
		// a set 0 is refused (before typed args, 0 meant unset)
		{"threshold 0", "modelPath: m\nmodelKeys: [k]\ntargetThreshold: 0", []string{"targetThreshold: Invalid value: 0: must be in (0, 1]"}},
		{"threshold high", "modelPath: m\nmodelKeys: [k]\ntargetThreshold: 1.5", []string{"targetThreshold: Invalid value: 1.5: must be in (0, 1]"}},
		{"kind", "kind: Other\napiVersion: v2\nmodelPath: m\nmodelKeys: [k]", []string{`kind: Unsupported value: "Other"`, `apiVersion: Unsupported value: "v2"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &EdgePolicyArgs{}
			if err := yaml.UnmarshalStrict([]byte(c.yaml), a); err != nil {
				t.Fatal(err)
			}
			SetDefaults_EdgePolicyArgs(a)
			err := ValidateEdgePolicyArgs(nil, a)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestDefaults: unset fields get the documented defaults, set ones are
// kept, and the deprecated publicKeys moves to modelKeys with a warning.
func TestDefaults(t *testing.T) {
	a := &EdgePolicyArgs{ModelConfigMap: "ns/m", PublicKeys: []string{"k"}}
	if w := Deprecations(a); len(w) != 1 || !strings.Contains(w[0], "publicKeys is deprecated") {
		t.Errorf("Deprecations = %q", w)
	}
	SetDefaults_EdgePolicyArgs(a)
	if a.ModelConfigMapKey != "model.esa" || a.ReloadInterval.Duration != 10*time.Second || a.TargetWorkload != "openb:default" ||
		*a.TargetThreshold != 0.95 || a.TelemetryMaxAge.Duration != 2*time.Minute || a.ModelMaxAge != nil ||
		len(a.ModelKeys) != 1 || a.PublicKeys != nil {
		t.Errorf("defaults %+v", a)
	}
	if Deprecations(a) != nil {
		t.Error("warnings after defaulting")
	}
	th := 0.5
	b := &EdgePolicyArgs{ReloadInterval: &metav1.Duration{Duration: time.Minute}, TargetThreshold: &th}
	SetDefaults_EdgePolicyArgs(b)
	if b.ReloadInterval.Duration != time.Minute || *b.TargetThreshold != 0.5 || b.ModelConfigMapKey != "" {
		t.Errorf("set fields changed: %+v", b)
	}
	// the deep copy is deep
	c := b.DeepCopy()
	c.ReloadInterval.Duration, *c.TargetThreshold = time.Hour, 1
	if b.ReloadInterval.Duration != time.Minute || *b.TargetThreshold != 0.5 {
		t.Error("DeepCopy shares pointers")
	}
}

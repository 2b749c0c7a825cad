package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgesched/edgesched/kubefmt"
)

// Defaults.
const (
	DefaultReloadInterval    = 10 * time.Second
	DefaultTargetWorkload    = "openb:default"
	DefaultTargetThreshold   = 0.95
	DefaultTelemetryMaxAge   = kubefmt.DefaultTelemetryMaxAge
	DefaultModelConfigMapKey = kubefmt.DefaultModelConfigMapKey
)

// SetDefaults_EdgePolicyArgs fills unset fields. The name is the
// defaulter-gen convention: kube-scheduler calls it through the scheme
// (zz_generated.defaults.go) when it decodes the args. It leaves the
// deprecated PublicKeys alone (Deprecations moves them), so the plugin
// can still warn about them after kube-scheduler has defaulted the args.
func SetDefaults_EdgePolicyArgs(a *EdgePolicyArgs) { //nolint:revive // the defaulter-gen convention
	if a.ModelConfigMap != "" && a.ModelConfigMapKey == "" {
		a.ModelConfigMapKey = DefaultModelConfigMapKey
	}
	if a.ReloadInterval == nil {
		a.ReloadInterval = &metav1.Duration{Duration: DefaultReloadInterval}
	}
	if a.TargetWorkload == "" {
		a.TargetWorkload = DefaultTargetWorkload
	}
	if a.TargetThreshold == nil {
		t := DefaultTargetThreshold
		a.TargetThreshold = &t
	}
	if a.TelemetryMaxAge == nil {
		a.TelemetryMaxAge = &metav1.Duration{Duration: DefaultTelemetryMaxAge}
	}
}

// Deprecations moves the deprecated fields a sets to their new names
// (PublicKeys to an unset ModelKeys; both set is left for validation to
// refuse) and returns a warning for each. Call it before validating.
func Deprecations(a *EdgePolicyArgs) []string {
	var w []string
	if len(a.PublicKeys) > 0 {
		w = append(w, "EdgePolicy args: publicKeys is deprecated and will be removed; use modelKeys (the same key files)")
		if len(a.ModelKeys) == 0 {
			a.ModelKeys, a.PublicKeys = a.PublicKeys, nil
		}
	}
	return w
}

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
	DefaultTelemetryMaxAge   = 2 * time.Minute
	DefaultModelConfigMapKey = kubefmt.DefaultModelConfigMapKey
)

// SetDefaults_EdgePolicyArgs fills unset fields, and moves the deprecated
// PublicKeys to ModelKeys when ModelKeys is unset (both set is left for
// validation to refuse). The name is the defaulter-gen convention.
func SetDefaults_EdgePolicyArgs(a *EdgePolicyArgs) { //nolint:revive // the defaulter-gen convention
	if a.ModelConfigMap != "" && a.ModelConfigMapKey == "" {
		a.ModelConfigMapKey = DefaultModelConfigMapKey
	}
	if len(a.ModelKeys) == 0 && len(a.PublicKeys) > 0 {
		a.ModelKeys, a.PublicKeys = a.PublicKeys, nil
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

// Deprecations are warnings about the deprecated fields a sets (call it
// before defaulting, which moves them to their new names).
func Deprecations(a *EdgePolicyArgs) []string {
	var w []string
	if len(a.PublicKeys) > 0 {
		w = append(w, "EdgePolicy args: publicKeys is deprecated and will be removed; use modelKeys (the same key files)")
	}
	return w
}

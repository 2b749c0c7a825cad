package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EdgePolicyArgs configure the EdgePolicy plugin: the internal form of
// v1.EdgePolicyArgs, field for field (see that type for each field's
// meaning, defaults and limits). kube-scheduler hands the plugin this
// type after decoding and defaulting the versioned one.
type EdgePolicyArgs struct {
	metav1.TypeMeta

	ModelPath         string
	ModelConfigMap    string
	ModelConfigMapKey string
	ModelKeys         []string
	// PublicKeys is the old name of ModelKeys.
	//
	// Deprecated: use ModelKeys.
	PublicKeys            []string
	ModelStatePath        string
	ModelMaxAge           *metav1.Duration
	ReloadInterval        *metav1.Duration
	TargetWorkload        string
	TargetThreshold       *float64
	TelemetryMaxAge       *metav1.Duration
	DependenciesConfigMap string
	TopologyConfigMap     string
	PolicyConfigMap       string
}

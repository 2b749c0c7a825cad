package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group and version of EdgePolicyArgs, those of
// the KubeSchedulerConfiguration that holds them. apiVersion and kind may
// be left out of the args; when present they must be these.
var SchemeGroupVersion = schema.GroupVersion{Group: "kubescheduler.config.k8s.io", Version: "v1"}

// Kind is EdgePolicyArgs' kind.
const Kind = "EdgePolicyArgs"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EdgePolicyArgs configure the EdgePolicy plugin. Unknown fields are
// refused. The zero value is not valid: a model source and modelKeys are
// required; SetDefaults_EdgePolicyArgs fills the rest.
type EdgePolicyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// ModelPath is the signed int8 artifact (.esa) to load and watch.
	// Exactly one of ModelPath and ModelConfigMap is set.
	ModelPath string `json:"modelPath,omitempty"`
	// ModelConfigMap is "namespace/name" of a ConfigMap holding the
	// signed artifact under ModelConfigMapKey (binaryData, or data): the
	// plugin watches that one ConfigMap.
	ModelConfigMap string `json:"modelConfigMap,omitempty"`
	// ModelConfigMapKey is the ConfigMap key of the artifact (default
	// model.esa); only with ModelConfigMap.
	ModelConfigMapKey string `json:"modelConfigMapKey,omitempty"`
	// ModelKeys are files with the trusted signing keys (edgectl's
	// "edgesched-ed25519-public" format); at least one is required.
	// Directories are read for *.pub, and *.retired files (keys retired
	// by a rotation) are refused (docs/security.md). The command lines'
	// --model-keys.
	ModelKeys []string `json:"modelKeys,omitempty"`
	// PublicKeys is the old name of ModelKeys, read for one release.
	//
	// Deprecated: use ModelKeys.
	PublicKeys []string `json:"publicKeys,omitempty"`
	// ModelStatePath is a state file (bbolt, created) keeping the highest
	// model version ever accepted, so rollback protection survives
	// restarts. Empty: within one process only.
	ModelStatePath string `json:"modelStatePath,omitempty"`
	// ModelMaxAge refuses a new model whose signed creation time is older
	// than this (1m..8760h). Unset: no limit.
	ModelMaxAge *metav1.Duration `json:"modelMaxAge,omitempty"`
	// ReloadInterval is how often ModelPath is checked for a new model
	// (1s..1h; default 10s).
	ReloadInterval *metav1.Duration `json:"reloadInterval,omitempty"`
	// TargetWorkload is the typical-pod distribution fragmentation is
	// measured against: an openb pod list reference (openb:default) or a
	// CSV path in that format. Default openb:default.
	TargetWorkload string `json:"targetWorkload,omitempty"`
	// TargetThreshold is the popularity share kept in the target
	// workload, in (0, 1]; default 0.95 (as in the simulator).
	TargetThreshold *float64 `json:"targetThreshold,omitempty"`
	// TelemetryMaxAge is the staleness bound of the agents' node
	// telemetry (the edgesched.io/telemetry annotation): an older summary
	// counts as missing and the node's load comes from the usage model
	// (10s..1h; default 2m).
	TelemetryMaxAge *metav1.Duration `json:"telemetryMaxAge,omitempty"`
	// DependenciesConfigMap is "namespace/name" of the ConfigMap holding
	// the site's service dependency graph (key dependencies.json; the site
	// leader writes it). Empty: no graph, the policy's dependency
	// features stay 0. Needs get/list/watch on that ConfigMap.
	DependenciesConfigMap string `json:"dependenciesConfigMap,omitempty"`
	// TopologyConfigMap is "namespace/name" of the ConfigMap holding the
	// site topology (key topology.json: each zone's carbon zone, hourly
	// carbon intensities, RTTs between zones; an operator writes it).
	// Empty: every zone has the flat default carbon intensity and the
	// default RTTs. Needs get/list/watch on that ConfigMap.
	TopologyConfigMap string `json:"topologyConfigMap,omitempty"`
	// PolicyConfigMap is "namespace/name" of the ConfigMap holding the
	// scheduling policy (key policy.yaml; 'edgectl policy apply' writes
	// it). Empty: no policy. Needs get/list/watch on that ConfigMap.
	PolicyConfigMap string `json:"policyConfigMap,omitempty"`
}

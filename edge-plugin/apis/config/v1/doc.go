// Package v1 is the versioned configuration of the EdgePolicy scheduler
// plugin: EdgePolicyArgs, a profile's pluginConfig[].args in a
// KubeSchedulerConfiguration, in the style of scheduler-plugins'
// apis/config/v1: typed durations (metav1.Duration, written as Go
// durations such as "10s"), defaulting (SetDefaults_EdgePolicyArgs),
// validation with field paths (ValidateEdgePolicyArgs) and a generated
// deep copy (zz_generated.deepcopy.go, deepcopy-gen; `make generate`).
//
// Deprecated names: publicKeys is the old name of modelKeys (one name per
// concept with the command lines' --model-keys, docs/cli.md). It is read
// for one release: defaulting moves it to modelKeys and Deprecations
// reports it, so the plugin logs a warning; setting both is refused.
//
// The args are plain data: not safe for concurrent mutation; the plugin
// keeps its own defaulted copy.
//
// +k8s:deepcopy-gen=package
// +groupName=kubescheduler.config.k8s.io
package v1

//go:generate go tool deepcopy-gen --output-file zz_generated.deepcopy.go --go-header-file /dev/null .

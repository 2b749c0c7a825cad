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
// for one release: Deprecations moves it to modelKeys and reports it (the
// plugin logs a warning; defaulting leaves it alone, so the warning
// survives kube-scheduler's own defaulting); setting both is refused.
//
// The args are plain data: not safe for concurrent mutation; the plugin
// keeps its own defaulted copy.
//
// Registration: importing the package registers EdgePolicyArgs, their
// defaults (zz_generated.defaults.go, defaulter-gen) and their
// conversions to and from the internal type of package config
// (zz_generated.conversion.go, conversion-gen) in kube-scheduler's v1
// scheme builder; package scheme puts them in kube-scheduler's scheme.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/edgesched/edgesched/edge-plugin/apis/config
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubescheduler.config.k8s.io
package v1

//go:generate go tool deepcopy-gen --output-file zz_generated.deepcopy.go --go-header-file /dev/null .
//go:generate go tool conversion-gen --output-file zz_generated.conversion.go --go-header-file /dev/null .
//go:generate go tool defaulter-gen --output-file zz_generated.defaults.go --go-header-file /dev/null .

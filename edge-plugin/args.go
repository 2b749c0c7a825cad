package edgeplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/kubefmt"
)

// Args configure EdgePolicy (pluginConfig[].args in the
// KubeSchedulerConfiguration). Unknown fields are refused.
type Args struct {
	// ModelPath is the signed int8 artifact (.esa) to load and watch.
	// Exactly one of ModelPath and ModelConfigMap is set.
	ModelPath string `json:"modelPath,omitempty"`
	// ModelConfigMap is "namespace/name" of a ConfigMap holding the
	// signed artifact under ModelConfigMapKey (binaryData, or data): the
	// plugin watches that one ConfigMap (model_configmap.go).
	ModelConfigMap string `json:"modelConfigMap,omitempty"`
	// ModelConfigMapKey is the ConfigMap key of the artifact (default
	// model.esa); only with ModelConfigMap.
	ModelConfigMapKey string `json:"modelConfigMapKey,omitempty"`
	// PublicKeys are files with the trusted signing keys (edgectl's
	// "edgesched-ed25519-public" format); at least one is required.
	// Directories are read for *.pub, and *.retired files (keys retired
	// by a rotation) are refused (docs/security.md).
	PublicKeys []string `json:"publicKeys"`
	// ModelStatePath is a state file (bbolt, created) keeping the highest
	// model version ever accepted, so rollback protection survives
	// restarts (model_trust.go). Empty: within one process only.
	ModelStatePath string `json:"modelStatePath,omitempty"`
	// ModelMaxAge refuses a new model whose signed creation time is older
	// than this (Go duration, 1m..8760h; default: no limit).
	ModelMaxAge string `json:"modelMaxAge,omitempty"`
	// ReloadInterval is how often ModelPath is checked for a new model
	// (Go duration; default 10s, between 1s and 1h).
	ReloadInterval string `json:"reloadInterval,omitempty"`
	// TargetWorkload is the typical-pod distribution fragmentation is
	// measured against: an openb pod list reference (openb:default) or a
	// CSV path in that format. Default openb:default.
	TargetWorkload string `json:"targetWorkload,omitempty"`
	// TargetThreshold is the popularity share kept in the target
	// workload, in (0, 1]; default 0.95 (as in the simulator).
	TargetThreshold float64 `json:"targetThreshold,omitempty"`
	// TelemetryMaxAge is the staleness bound of the agents' node
	// telemetry (the edgesched.io/telemetry annotation): an older summary
	// counts as missing and the node's load comes from the usage model
	// (Go duration; default 2m, between 10s and 1h).
	TelemetryMaxAge string `json:"telemetryMaxAge,omitempty"`
	// DependenciesConfigMap is "namespace/name" of the ConfigMap holding
	// the site's service dependency graph (key dependencies.json, format
	// kubefmt.DependencyGraph; the site leader writes it). Empty: no
	// graph, the policy's dependency features stay 0. Needs get/list/watch
	// on that ConfigMap. See docs/edge-plugin.md, "Service dependencies".
	DependenciesConfigMap string `json:"dependenciesConfigMap,omitempty"`
	// TopologyConfigMap is "namespace/name" of the ConfigMap holding the
	// site topology (key topology.json, format kubefmt.Topology: each
	// zone's carbon zone, hourly carbon intensities, RTTs between zones;
	// an operator writes it). Empty: every zone has the flat default
	// carbon intensity and the default RTTs. Needs get/list/watch on that
	// ConfigMap. See docs/edge-plugin.md, "Site topology".
	TopologyConfigMap string `json:"topologyConfigMap,omitempty"`
	// PolicyConfigMap is "namespace/name" of the ConfigMap holding the
	// scheduling policy (key policy.yaml, format policydoc; 'edgectl
	// policy apply' writes it). Empty: no policy. Needs get/list/watch on
	// that ConfigMap. See docs/policy-language.md.
	PolicyConfigMap string `json:"policyConfigMap,omitempty"`
}

// Defaults.
const (
	DefaultReloadInterval    = 10 * time.Second
	DefaultTargetWorkload    = "openb:default"
	DefaultTargetThreshold   = 0.95
	DefaultTelemetryMaxAge   = 2 * time.Minute
	DefaultModelConfigMapKey = kubefmt.DefaultModelConfigMapKey
)

// ErrArgs wraps every argument refusal.
var ErrArgs = errors.New("edgeplugin: invalid EdgePolicy args")

// SetDefaults fills unset fields.
func (a *Args) SetDefaults() {
	if a.ModelConfigMap != "" && a.ModelConfigMapKey == "" {
		a.ModelConfigMapKey = DefaultModelConfigMapKey
	}
	if a.ReloadInterval == "" {
		a.ReloadInterval = DefaultReloadInterval.String()
	}
	if a.TargetWorkload == "" {
		a.TargetWorkload = DefaultTargetWorkload
	}
	if a.TargetThreshold == 0 {
		a.TargetThreshold = DefaultTargetThreshold
	}
	if a.TelemetryMaxAge == "" {
		a.TelemetryMaxAge = DefaultTelemetryMaxAge.String()
	}
}

// Validate checks defaulted args.
func (a *Args) Validate() error {
	switch {
	case a.ModelPath == "" && a.ModelConfigMap == "":
		return fmt.Errorf("%w: a model source is required: modelPath (a file) or modelConfigMap (namespace/name)", ErrArgs)
	case a.ModelPath != "" && a.ModelConfigMap != "":
		return fmt.Errorf("%w: modelPath and modelConfigMap are mutually exclusive (set one model source)", ErrArgs)
	case a.ModelConfigMapKey != "" && a.ModelConfigMap == "":
		return fmt.Errorf("%w: modelConfigMapKey is only meaningful with modelConfigMap", ErrArgs)
	}
	if a.ModelConfigMap != "" {
		if _, _, err := a.modelConfigMap(); err != nil {
			return err
		}
		if errs := validation.IsConfigMapKey(a.ModelConfigMapKey); len(errs) > 0 {
			return fmt.Errorf("%w: modelConfigMapKey %q: %s", ErrArgs, a.ModelConfigMapKey, strings.Join(errs, "; "))
		}
	}
	if _, err := a.feedRefs(); err != nil {
		return err
	}
	if _, _, err := a.policyRef(); err != nil {
		return err
	}
	if len(a.PublicKeys) == 0 {
		return fmt.Errorf("%w: publicKeys needs at least one key file (models are only accepted signed)", ErrArgs)
	}
	for i, k := range a.PublicKeys {
		if k == "" {
			return fmt.Errorf("%w: publicKeys[%d] is empty", ErrArgs, i)
		}
	}
	d, err := a.reloadInterval()
	if err != nil {
		return fmt.Errorf("%w: reloadInterval %q: %v", ErrArgs, a.ReloadInterval, err)
	}
	if d < time.Second || d > time.Hour {
		return fmt.Errorf("%w: reloadInterval %s must be between 1s and 1h", ErrArgs, d)
	}
	if !(a.TargetThreshold > 0 && a.TargetThreshold <= 1) {
		return fmt.Errorf("%w: targetThreshold %v must be in (0, 1]", ErrArgs, a.TargetThreshold)
	}
	if err := a.validateModelTrust(); err != nil {
		return err
	}
	m, err := a.telemetryMaxAge()
	if err != nil {
		return fmt.Errorf("%w: telemetryMaxAge %q: %v", ErrArgs, a.TelemetryMaxAge, err)
	}
	if m < 10*time.Second || m > time.Hour {
		return fmt.Errorf("%w: telemetryMaxAge %s must be between 10s and 1h", ErrArgs, m)
	}
	return nil
}

// modelConfigMap splits ModelConfigMap into a valid namespace and name.
func (a *Args) modelConfigMap() (namespace, name string, err error) {
	return configMapRef("modelConfigMap", a.ModelConfigMap)
}

// feedRefs are the ConfigMaps the plugin feeds on besides the model's
// (empty names: none).
type feedRefs struct {
	depNS, depName   string // DependenciesConfigMap
	topoNS, topoName string // TopologyConfigMap
}

func (r feedRefs) any() bool { return r.depName != "" || r.topoName != "" }

// feedRefs splits DependenciesConfigMap and TopologyConfigMap into valid
// namespaces and names.
func (a *Args) feedRefs() (r feedRefs, err error) {
	if a.DependenciesConfigMap != "" {
		if r.depNS, r.depName, err = configMapRef("dependenciesConfigMap", a.DependenciesConfigMap); err != nil {
			return feedRefs{}, err
		}
	}
	if a.TopologyConfigMap != "" {
		if r.topoNS, r.topoName, err = configMapRef("topologyConfigMap", a.TopologyConfigMap); err != nil {
			return feedRefs{}, err
		}
	}
	return r, nil
}

// configMapRef splits the "namespace/name" value of field.
func configMapRef(field, ref string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: %s %q must be namespace/name", ErrArgs, field, ref)
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return "", "", fmt.Errorf("%w: %s %q: namespace: %s", ErrArgs, field, ref, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", fmt.Errorf("%w: %s %q: name: %s", ErrArgs, field, ref, strings.Join(errs, "; "))
	}
	return namespace, name, nil
}

func (a *Args) reloadInterval() (time.Duration, error) { return time.ParseDuration(a.ReloadInterval) }

// telemetryMaxAge is the parsed TelemetryMaxAge (the default when unset).
func (a *Args) telemetryMaxAge() (time.Duration, error) {
	if a.TelemetryMaxAge == "" {
		return DefaultTelemetryMaxAge, nil
	}
	return time.ParseDuration(a.TelemetryMaxAge)
}

// DecodeArgs reads plugin args as the scheduler passes them (a
// *runtime.Unknown holding JSON or YAML, or nil), strictly, then applies
// defaults and validates.
func DecodeArgs(obj runtime.Object) (*Args, error) {
	a := &Args{}
	switch o := obj.(type) {
	case nil:
	case *Args:
		*a = *o
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			raw := o.Raw
			if o.ContentType == runtime.ContentTypeYAML {
				j, err := yaml.YAMLToJSON(raw)
				if err != nil {
					return nil, fmt.Errorf("%w: %v", ErrArgs, err)
				}
				raw = j
			}
			if err := yaml.UnmarshalStrict(raw, a); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrArgs, err)
			}
		}
	default:
		return nil, fmt.Errorf("%w: args of type %T", ErrArgs, obj)
	}
	a.SetDefaults()
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return a, nil
}

// DeepCopyObject and GetObjectKind let *Args be passed where the framework
// expects a runtime.Object (tests and embedding programs).
func (a *Args) DeepCopyObject() runtime.Object {
	b, _ := json.Marshal(a)
	c := &Args{}
	_ = json.Unmarshal(b, c)
	return c
}

// GetObjectKind implements runtime.Object.
func (a *Args) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

package edgeplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/edge-plugin/apis/config"
	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
	// kube-scheduler decodes, defaults and converts EdgePolicy's args
	// itself once they are in its scheme
	_ "github.com/edgesched/edgesched/edge-plugin/apis/config/scheme"
)

// Args configure EdgePolicy (pluginConfig[].args in the
// KubeSchedulerConfiguration): the versioned type of
// edge-plugin/apis/config/v1. Unknown fields are refused.
type Args = configv1.EdgePolicyArgs

// Defaults (those of apis/config/v1).
const (
	DefaultReloadInterval    = configv1.DefaultReloadInterval
	DefaultTargetWorkload    = configv1.DefaultTargetWorkload
	DefaultTargetThreshold   = configv1.DefaultTargetThreshold
	DefaultTelemetryMaxAge   = configv1.DefaultTelemetryMaxAge
	DefaultModelConfigMapKey = configv1.DefaultModelConfigMapKey
)

// ErrArgs wraps every argument refusal.
var ErrArgs = errors.New("edgeplugin: invalid EdgePolicy args")

// DecodeArgs reads plugin args as the scheduler passes them (the internal
// *config.EdgePolicyArgs kube-scheduler decoded and defaulted through its
// scheme, a *runtime.Unknown holding JSON or YAML, an *Args, or nil),
// strictly, then applies defaults and validates. The result is the
// caller's own copy.
func DecodeArgs(obj runtime.Object) (*Args, error) {
	a, _, err := decodeArgs(obj)
	return a, err
}

// decodeArgs is DecodeArgs, with warnings about deprecated fields.
func decodeArgs(obj runtime.Object) (*Args, []string, error) {
	a := &Args{}
	switch o := obj.(type) {
	case nil:
	case *Args:
		o.DeepCopyInto(a)
	case *config.EdgePolicyArgs:
		// the generated conversion shares slices and pointers: convert a
		// copy
		if err := configv1.Convert_config_EdgePolicyArgs_To_v1_EdgePolicyArgs(o.DeepCopy(), a, nil); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrArgs, err)
		}
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			raw := o.Raw
			if o.ContentType == runtime.ContentTypeYAML {
				j, err := yaml.YAMLToJSON(raw)
				if err != nil {
					return nil, nil, fmt.Errorf("%w: %v", ErrArgs, err)
				}
				raw = j
			}
			if err := yaml.UnmarshalStrict(raw, a); err != nil {
				return nil, nil, fmt.Errorf("%w: %v", ErrArgs, namedDurationError(raw, err))
			}
		}
	default:
		return nil, nil, fmt.Errorf("%w: args of type %T", ErrArgs, obj)
	}
	warnings := configv1.Deprecations(a)
	configv1.SetDefaults_EdgePolicyArgs(a)
	if err := configv1.ValidateEdgePolicyArgs(nil, a); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrArgs, err)
	}
	return a, warnings, nil
}

// namedDurationError names the field of a duration that does not parse
// (the JSON decoder's error does not say which one); else err.
func namedDurationError(raw []byte, err error) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return err
	}
	for _, name := range []string{"reloadInterval", "modelMaxAge", "telemetryMaxAge"} {
		var v string
		if f, ok := fields[name]; ok && json.Unmarshal(f, &v) == nil {
			if _, perr := time.ParseDuration(v); perr != nil {
				return fmt.Errorf("%s: %w (a Go duration such as 90s or 10m)", name, perr)
			}
		}
	}
	return err
}

// configRef is a validated ConfigMap reference ("" name: none).
type configRef struct{ ns, name string }

func refOf(ref string) configRef {
	ns, name := configv1.SplitConfigMapRef(ref)
	return configRef{ns, name}
}

// settings are defaulted, validated args, parsed once.
type settings struct {
	reload, telMaxAge, modelMaxAge time.Duration
	model, deps, topo, policy      configRef
}

// settingsOf parses a (from DecodeArgs).
func settingsOf(a *Args) settings {
	s := settings{model: refOf(a.ModelConfigMap), deps: refOf(a.DependenciesConfigMap),
		topo: refOf(a.TopologyConfigMap), policy: refOf(a.PolicyConfigMap),
		reload: DefaultReloadInterval, telMaxAge: DefaultTelemetryMaxAge}
	if a.ReloadInterval != nil {
		s.reload = a.ReloadInterval.Duration
	}
	if a.TelemetryMaxAge != nil {
		s.telMaxAge = a.TelemetryMaxAge.Duration
	}
	if a.ModelMaxAge != nil {
		s.modelMaxAge = a.ModelMaxAge.Duration
	}
	return s
}

// feeds reports whether s watches a dependency graph or topology ConfigMap.
func (s settings) feeds() bool { return s.deps.name != "" || s.topo.name != "" }

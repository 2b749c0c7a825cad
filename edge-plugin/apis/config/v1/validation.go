package v1

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateEdgePolicyArgs checks defaulted args; every problem is reported,
// each under its field's path below path (nil: the args' own fields).
func ValidateEdgePolicyArgs(path *field.Path, a *EdgePolicyArgs) error {
	var errs field.ErrorList
	if a.APIVersion != "" && a.APIVersion != SchemeGroupVersion.String() {
		errs = append(errs, field.NotSupported(path.Child("apiVersion"), a.APIVersion, []string{SchemeGroupVersion.String()}))
	}
	if a.Kind != "" && a.Kind != Kind {
		errs = append(errs, field.NotSupported(path.Child("kind"), a.Kind, []string{Kind}))
	}
	switch {
	case a.ModelPath == "" && a.ModelConfigMap == "":
		errs = append(errs, field.Required(path.Child("modelPath"), "a model source is required: modelPath (a file) or modelConfigMap (namespace/name)"))
	case a.ModelPath != "" && a.ModelConfigMap != "":
		errs = append(errs, field.Forbidden(path.Child("modelConfigMap"), "modelPath and modelConfigMap are mutually exclusive (set one model source)"))
	}
	if a.ModelConfigMapKey != "" && a.ModelConfigMap == "" {
		errs = append(errs, field.Forbidden(path.Child("modelConfigMapKey"), "only meaningful with modelConfigMap"))
	}
	if a.ModelConfigMap != "" {
		if msgs := validation.IsConfigMapKey(a.ModelConfigMapKey); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("modelConfigMapKey"), a.ModelConfigMapKey, strings.Join(msgs, "; ")))
		}
	}
	for _, f := range []struct {
		name, ref string
	}{{"modelConfigMap", a.ModelConfigMap}, {"dependenciesConfigMap", a.DependenciesConfigMap},
		{"topologyConfigMap", a.TopologyConfigMap}, {"policyConfigMap", a.PolicyConfigMap}} {
		if f.ref == "" {
			continue
		}
		if _, _, msg := splitConfigMapRef(f.ref); msg != "" {
			errs = append(errs, field.Invalid(path.Child(f.name), f.ref, msg))
		}
	}
	switch {
	case len(a.ModelKeys) > 0 && len(a.PublicKeys) > 0:
		errs = append(errs, field.Forbidden(path.Child("publicKeys"), "publicKeys is the deprecated name of modelKeys: set only modelKeys"))
	case len(a.ModelKeys) == 0:
		errs = append(errs, field.Required(path.Child("modelKeys"), "at least one key file (models are only accepted signed)"))
	}
	for i, k := range a.ModelKeys {
		if k == "" {
			errs = append(errs, field.Required(path.Child("modelKeys").Index(i), "an empty key file name"))
		}
	}
	errs = append(errs, durationIn(path.Child("reloadInterval"), a.ReloadInterval, time.Second, time.Hour, true)...)
	errs = append(errs, durationIn(path.Child("modelMaxAge"), a.ModelMaxAge, time.Minute, 365*24*time.Hour, false)...)
	errs = append(errs, durationIn(path.Child("telemetryMaxAge"), a.TelemetryMaxAge, 10*time.Second, time.Hour, true)...)
	if t := a.TargetThreshold; t == nil || !(*t > 0 && *t <= 1) {
		var v any
		if t != nil {
			v = *t
		}
		errs = append(errs, field.Invalid(path.Child("targetThreshold"), v, "must be in (0, 1]"))
	}
	return errs.ToAggregate()
}

// durationIn checks that d is within [lo, hi] (set, if required).
func durationIn(p *field.Path, d *metav1.Duration, lo, hi time.Duration, required bool) field.ErrorList {
	if d == nil {
		if required {
			return field.ErrorList{field.Required(p, "")}
		}
		return nil
	}
	if d.Duration < lo || d.Duration > hi {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be between "+lo.String()+" and "+hi.String())}
	}
	return nil
}

// SplitConfigMapRef splits a validated "namespace/name" ConfigMap
// reference ("" for both when ref is empty or invalid).
func SplitConfigMapRef(ref string) (namespace, name string) {
	ns, n, msg := splitConfigMapRef(ref)
	if msg != "" {
		return "", ""
	}
	return ns, n
}

// splitConfigMapRef splits ref, or says what is wrong with it.
func splitConfigMapRef(ref string) (namespace, name, problem string) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || strings.Contains(name, "/") {
		return "", "", "must be namespace/name"
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return "", "", "namespace: " + strings.Join(msgs, "; ")
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", "", "name: " + strings.Join(msgs, "; ")
	}
	return namespace, name, ""
}

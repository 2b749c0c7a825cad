package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	kubeschedv1 "k8s.io/kube-scheduler/config/v1"
)

var (
	// localSchemeBuilder is kube-scheduler's v1 scheme builder:
	// registering in it makes kube-scheduler decode a profile's args of
	// plugin EdgePolicy as EdgePolicyArgs (the kind is the plugin's name
	// and "Args"), default them and convert them to the internal type.
	localSchemeBuilder = &kubeschedv1.SchemeBuilder
	// AddToScheme adds kube-scheduler's v1 configuration types,
	// EdgePolicyArgs with their defaults and conversions, to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// the generated files register the defaults and the conversions
	localSchemeBuilder.Register(addKnownTypes, RegisterDefaults)
}

// addKnownTypes registers EdgePolicyArgs.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &EdgePolicyArgs{})
	return nil
}

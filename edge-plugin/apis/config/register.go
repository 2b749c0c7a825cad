package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is the internal version of kube-scheduler's
// configuration group, where EdgePolicyArgs are registered.
var SchemeGroupVersion = schema.GroupVersion{Group: kubeconfig.GroupName, Version: runtime.APIVersionInternal}

var (
	// localSchemeBuilder is kube-scheduler's internal scheme builder:
	// registering in it puts EdgePolicyArgs in every scheme kube-scheduler
	// builds from it, its plugin-args conversion scheme included.
	localSchemeBuilder = &kubeconfig.SchemeBuilder
	// AddToScheme adds kube-scheduler's internal configuration types,
	// EdgePolicyArgs with them, to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	localSchemeBuilder.Register(addKnownTypes)
}

// addKnownTypes registers EdgePolicyArgs.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &EdgePolicyArgs{})
	return nil
}

// Package kubeclientset adapts a client-go clientset (the fake one of unit
// tests, or a real one) to kube.Interface. It links client-go's whole
// clientset: tests and other binaries may import it, the edge agent must
// not (TestAgentDependencies in internal/agentcmd guards that).
//
// Concurrency: the adapter is as safe for concurrent use as the clientset.
package kubeclientset

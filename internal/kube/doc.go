// Package kube is the part of the Kubernetes API the edge agent uses, and
// the clients that speak it: core/v1 Nodes (the telemetry and flows
// annotations, the site trace's informer), Pods (the site trace's
// informer), ConfigMaps (the site ledger and the model ConfigMap) and
// coordination/v1 Leases (the site leader election).
//
// Interface and its per-resource interfaces have exactly the method
// signatures of client-go's typed clients, so a clientset's CoreV1().Nodes()
// is a NodeInterface. NewForConfig builds the agent's own clients on
// client-go's rest and gentype packages with a scheme that holds only
// core/v1 and coordination/v1. It does not import client-go's clientset
// (k8s.io/client-go/kubernetes) or its typed packages: those register
// every API group's types in one scheme at init, and that alone made the
// stripped agent binary tens of megabytes larger (docs/agent.md, "Binary
// size"). Tests adapt a client-go clientset (fake or real) with
// kube/kubeclientset, which the agent binary never links.
//
// Concurrency and lifetimes: a *Clients and the resource clients it
// returns are safe for concurrent use and hold no goroutines; they share
// one HTTP client (one connection pool) for the process's life.
package kube

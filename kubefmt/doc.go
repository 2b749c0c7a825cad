// Package kubefmt is what Kubernetes objects mean to edgesched: the one
// definition of the extended resources, labels and annotations its parts
// read and write (docs/edge-plugin.md documents each), the payloads of
// the ConfigMaps they share (the signed model's name and key, the service
// dependency graph and its service embeddings, the site topology), the
// node telemetry annotation the edge agent writes and the scheduler
// plugin reads, the flows annotation (pod-to-pod call rates) each agent
// writes for its node and every agent of the site reads, the explanation
// annotation the plugin writes and `edgectl explain` reads, and the one
// conversion of a Pod and a Node into the simulator's terms (SimPod,
// SimNode) that the plugin schedules with and the agent's trace recorder
// records with, so the site's digital twin trains on pods read exactly as
// the scheduler reads them.
//
// It is deliberately light: it imports the core API types, apimachinery
// and the simulator's model, never the kube-scheduler, k8s.io/kubernetes,
// client-go, the agent or the plugin (kubefmt/deps_test.go checks it). The
// edge agent (which must not link the kube-scheduler) and the scheduler
// plugin both import it and neither imports the other.
//
// It holds no state: every function is safe for concurrent use, and
// decoded values are plain data owned by the caller. Converted values
// (SimPod, SimNode) copy what they need and keep no reference to the
// Kubernetes object they were read from.
package kubefmt

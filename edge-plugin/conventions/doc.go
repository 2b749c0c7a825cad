// Package conventions holds the Kubernetes conventions edgesched's parts
// share: the extended resources, labels and annotations the scheduler
// plugin reads and writes (see docs/edge-plugin.md), the reading of a
// pod's GPU request, QoS class and CPU usage in the simulator's terms, and
// the model ConfigMap's default name and key.
//
// It is deliberately light: it imports the core API types and the
// simulator's model only, so the edge agent (which must not link the
// kube-scheduler) and the scheduler plugin read the same pods the same
// way. It holds no state; every function is safe for concurrent use.
package conventions

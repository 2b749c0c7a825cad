// Package agent will hold edge-agent, the process installed on every K3s
// node: node telemetry (agent/telemetry, eBPF programs beside their
// cilium/ebpf loaders, with a /proc fallback), the site leader elected
// through a Kubernetes Lease, the workload-trace recorder, the local
// trainer loop, the federated-learning client with its bbolt outbox, and
// the installer that verifies models and writes them to the ConfigMap the
// scheduler plugin watches.
//
// Nothing is implemented yet; see the project's open issues. The agent
// binary must not link the kube-scheduler.
package agent

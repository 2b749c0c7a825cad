// Package deploy will hold the K3s deployment: plain manifests and a Helm
// chart (agent DaemonSet, edge-scheduler Deployment with its RBAC and
// KubeSchedulerConfiguration, the model ConfigMap, coordinator and NATS with
// JetStream, a NATS leaf-node configuration for sites) and systemd units for
// running agent and coordinator outside Kubernetes. The Go package embeds
// them so tests can render and dry-run-apply them against a real API server.
//
// Nothing is implemented yet; see the project's open issues.
package deploy

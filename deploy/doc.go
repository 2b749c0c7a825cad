// Package deploy holds the K3s deployment files. Today:
// edge-scheduler/scheduler-config.yaml, a KubeSchedulerConfiguration that
// runs cmd/edge-scheduler as a secondary scheduler (schedulerName
// edgesched) with the EdgePolicy plugin (see docs/edge-plugin.md).
//
// Still to come: plain manifests and a Helm chart (agent DaemonSet,
// edge-scheduler Deployment with its RBAC, the model ConfigMap,
// coordinator and NATS with JetStream, a NATS leaf-node configuration for
// sites) and systemd units for running agent and coordinator outside
// Kubernetes, embedded so tests can render and dry-run-apply them against
// a real API server.
package deploy

// Package deploy holds the files that install edgesched (docs/deploy.md);
// it has no Go code of its own.
//
//   - helm/edgesched: the Helm chart. Site side (site.enabled): the
//     edge-agent DaemonSet with the privileges eBPF needs, edge-scheduler
//     as a secondary scheduler with its RBAC and KubeSchedulerConfiguration,
//     the model ConfigMap, site-leader RBAC, a NATS leaf node. Cloud side
//     (cloud.enabled): edge-coordinator with its bbolt registry on a PVC and
//     NATS with JetStream.
//   - helm/edgesched/dashboards: Grafana dashboards (scheduler, agent,
//     coordinator), rendered as sidecar ConfigMaps with
//     grafana.dashboards.enabled.
//   - manifests: the chart rendered for K3s's auto-deploy folder
//     (`make manifests`); k3s/helmchart.yaml: a HelmChart for K3s's Helm
//     controller.
//   - edge-scheduler: the KubeSchedulerConfiguration, RBAC and extender
//     configurations for running edge-scheduler by hand (docs/edge-plugin.md;
//     k3s-extender-policy.yaml when the extender enforces a scheduling
//     policy).
//   - nats: hub and leaf-node configurations outside Kubernetes.
//   - systemd: hardened units for edge-agent and edge-coordinator.
//
// test/e2e/deploy_e2e_test.go renders the chart with several value sets and
// applies every object with a server-side dry-run against a real
// kube-apiserver, checks the manifests against a fresh render, installs the
// site side and runs edge-scheduler with it; deploy_hosts_e2e_test.go runs
// the NATS configurations and verifies the systemd units.
package deploy

// Package schedcmd is edge-scheduler's command line: kube-scheduler's
// scheduler (k8s.io/kubernetes/pkg/scheduler) with the EdgePolicy plugin
// in its out-of-tree registry, run without kube-scheduler's app (run.go:
// the configuration through kube-scheduler's scheme and validation, leader
// election, events; serve.go: /livez, /readyz, /healthz and a /metrics
// guarded by TokenReview and SubjectAccessReview on the secure port;
// options.go: the kube-scheduler flags a deployment uses, under their
// names); `edge-scheduler extender` (the same policy over the HTTP
// extender protocol: extender.go, serving extender.Start); the version;
// and the completion scripts. cmd/edge-scheduler only calls Main.
//
// Exit codes (docs/cli.md): 0 success, -h, --version, the version verb,
// and a scheduler stopped by its context (SIGTERM); 2 for a bad command
// line (an unknown command, an unknown flag or a value wrong on its
// face); 1 when the scheduler fails or loses its lease.
//
// Lifetimes: runScheduler owns every goroutine it starts (informers, the
// event broadcaster, the secure server, leader election) through its
// context and returns after stopping them, except the informers', which
// end with the context. The scheduler registers process-global state
// (klog flags, feature gates, kube-scheduler's metrics in the legacy
// registry), so a process runs one scheduler; tests run it in a child
// process. The command line's parsing and the endpoints' handlers have no
// such limit. Never add a cobra template (SetVersionTemplate and the
// like): text/template's execution makes the linker keep every exported
// method and takes the binary from 50 to 78 MB (docs/edge-plugin.md,
// "Binary size").
package schedcmd

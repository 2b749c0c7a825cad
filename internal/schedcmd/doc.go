// Package schedcmd is edge-scheduler's command line: kube-scheduler with
// the EdgePolicy plugin registered (every kube-scheduler flag applies),
// `edge-scheduler extender` (the same policy over the HTTP extender
// protocol: extender.go, serving extender.Start), the
// version, and the completion scripts (bash, zsh, fish, powershell:
// kube-scheduler's flags and the verbs). cmd/edge-scheduler only calls
// Main.
//
// Exit codes (docs/cli.md): 0 success, -h, --version and the version verb;
// 2 for a bad command line (an unknown command, an unknown flag or a value
// that does not parse); 1 when the scheduler fails. Main runs one command
// line per process: kube-scheduler's command registers global state
// (klog, feature gates, metrics), so a test runs at most one scheduler
// command line per test binary; the version, usage and extender paths
// have no such limit.
package schedcmd

// Package e2e is the end-to-end harness for the scheduler: it runs a real
// Kubernetes control plane on loopback — kine on SQLite (K3s's default
// datastore) and the real kube-apiserver — registers Node objects with
// heterogeneous capacity (no kubelet: the harness sets the Ready condition
// and lifts the not-ready taint itself, like kwok), and starts schedulers
// (the stock kube-scheduler, or edge-scheduler with the EdgePolicy plugin:
// edgescheduler_test.go) against it.
//
// Programs are built from the versions pinned in go.mod (kine and
// kube-apiserver are Go tool dependencies; kube-scheduler comes from the
// same k8s.io/kubernetes module). Build compiles them once per test
// binary and caches them under os.UserCacheDir()/edgesched-e2e, keyed by
// the hash of go.sum and the Go version, so later `go test` runs reuse
// them. The very first build takes several minutes on a small machine:
// run it with a generous -timeout (e.g. `go test -timeout 30m ./test/e2e/`).
// Set EDGESCHED_E2E_BIN_DIR to a directory holding prebuilt binaries (named
// after the last element of their package path) to skip building.
//
// Typical use:
//
//	e2e.Build(t, e2e.KinePkg, e2e.APIServerPkg, e2e.SchedulerPkg) // one go build for all
//	cp := e2e.Start(t, e2e.Options{})                              // kine + kube-apiserver, ready
//	nodes, _ := openb.LoadNodes("openb:all_node", nil)
//	_, err := e2e.RegisterNodes(ctx, cp.Client, nodes, 32)         // Ready, untainted
//	sched := cp.StartScheduler(t, e2e.SchedulerOptions{})          // stock kube-scheduler
//	ns := cp.Namespace(ctx, t, "work")                            // with its default ServiceAccount
//
// Every process runs in its own process group, writes its output to a log
// file in the test's temporary directory, and is stopped by its PID in
// t.Cleanup (SIGTERM, then SIGKILL after a grace period). Logs are printed
// when the test fails. All listeners are on 127.0.0.1. The tests skip,
// saying why, when the go tool is missing, under -short, or off Linux/Unix.
package e2e

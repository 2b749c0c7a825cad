// Package metricstest checks what every edgesched daemon's /metrics
// promises besides its own series (cli.RegisterProcessMetrics): the Go
// runtime's, the process's and edgesched_build_info. For tests only (it
// calls t.Fatal); stateless.
package metricstest

// Package report turns simulation results into the comparison table, the
// JSON document (schema edgesched.sim/v1, docs/sim-json.md), CSV files and
// PNG plots (gonum.org/v1/plot). A Document is plain data; its methods do
// not modify it and may run concurrently.
package report

// Package openb reads the openb traces (Alibaba cluster-trace-gpu-v2023,
// CC BY 4.0, from "Beware of Fragmentation", USENIX ATC'23) and embeds
// them, so "openb:default" or "openb:all_node" work wherever a trace file
// is accepted. See data/README.md for the files and their attribution.
//
// The readers are strict: a missing column, a negative or non-numeric
// value, an unknown GPU model or a duplicate name is a *sim.LineError that
// names the file, line and column. They stream the CSV and keep only the
// parsed rows; they are safe for concurrent use.
package openb

// Package cmd holds the project's thin main packages: edgectl today;
// edge-agent, edge-coordinator and edge-scheduler as their libraries land.
// Each main only wires flags, logging and signals to a library package.
package cmd

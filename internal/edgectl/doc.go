// Package edgectl assembles the edgectl command tree with cobra
// (NewRootCommand) and runs it (Execute). The verbs live in subpackages,
// one file per verb: simulate (sim, demo, train, scenario), model (model,
// bench), policy, auth, fleet (round, sites, replicas, regions) and
// cluster (explain, topology, trace); version and shell completion are
// here. Shared flags, output formats, input reading and progress bars are
// package cmdutil's, the client of the coordinator's admin API package
// adminclient's, and edgectltest drives the whole tree from the
// subpackages' tests.
//
// Commands write their results to cmd.OutOrStdout() and progress and
// diagnostics to cmd.ErrOrStderr(), so tests can drive them end to end.
// A tree from NewRootCommand holds its flags' values: build one per
// execution.
package edgectl

// Package constraint applies an operator's policy document (policydoc) to
// the simulator: Wrap turns any sim.Policy into one whose required rules
// filter nodes (sim.NodeFilter) and whose preferred rules adjust scores the
// way the scheduler plugin does (the base scores of a decision are rescaled
// to [0, 100] and mixed with the rules' score, policydoc.Document.Combine).
// DryRun replays one input with and without a document and reports what
// changed: placements moved, the measures before and after (failures,
// cross-zone traffic, the p95 latency proxy, gCO2), the cross-zone share of
// every co-located pair, the placements of the run without the document
// that break its required rules, and the decisions the document blocked.
//
// The hour of day the rules see is the simulated time's (sim.State.Now),
// the clock the carbon curves use.
//
// Concurrency and lifetimes: a wrapped policy belongs to one run, like any
// sim.Policy; the document is only read and may be shared. DryRun runs its
// two replays one after the other and honours ctx.
package constraint

// Package simulate holds the edgectl verbs around the simulator: sim
// (compare scheduling policies on openb traces or scenarios), scenario
// (list, show, validate, calibrate), train (a learned policy, with PPO)
// and demo (the simulator comparison and the federated system on one
// machine).
//
// Each constructor returns a new command with its own flags. sim,
// scenario calibrate and demo run the simulator on --parallel goroutines
// (engine.Compare), train its rollouts on --workers; all stop when the
// command's context is cancelled. demo's embedded NATS server,
// coordinator and sites (package fldemo) end with the command.
package simulate

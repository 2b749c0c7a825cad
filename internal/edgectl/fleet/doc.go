// Package fleet holds the edgectl verbs that ask a running coordinator
// about the fleet over its admin API (package adminclient): round
// (start, status, list), sites, replicas and regions. The model
// registry's verbs (model list, show, promote, rollback) are package
// model's.
//
// Each constructor returns a new command with its own flags; a command
// connects to NATS only while it runs.
package fleet

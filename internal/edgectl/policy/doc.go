// Package policy holds edgectl policy and its verbs, which work with
// scheduling-policy documents (package policydoc; not the learned policy
// of package github.com/edgesched/edgesched/policy): compile (English or
// Chinese sentences to a document), explain, dry-run (a scenario replayed
// with and without a document) and apply (the document into the
// ConfigMap the scheduler watches).
//
// Each constructor returns a new command with its own flags; apply talks
// to the cluster only while it runs, within its --timeout.
package policy

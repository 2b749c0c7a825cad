// Package site is the site leader of edge-agent: the agents of one site
// (one K3s cluster) elect a leader with a coordination.k8s.io Lease
// (Elector: client-go's leader-election rules, implemented in lease.go on
// internal/kube's Lease client), and the leader alone runs the
// leader-only components: the federated-learning client (FL, training in
// the site's twin with TwinTrainer from the workload trace that every
// agent records with agent/trace), the model installer (Installer,
// which writes verified models into the ConfigMap the scheduler plugin
// watches) and the components the caller adds (edge-agent adds the
// dependency graph publisher, agent/depgraph).
//
// The site's update sequence and its unsent updates live in the cluster
// (Ledger, a flclient.Sequencer): sequences are reserved by
// compare-and-swap on a ConfigMap, and every queued update is handed over
// in a ConfigMap until the stream stored it, so a new leader continues the
// sequence above every one used before and sends its predecessors' unsent
// updates first; during a term the leader also adopts, every
// FLConfig.AdoptInterval, what an old leader staged after the term began
// (Ledger.AdoptLate). The Lease names its holder NODE_INSTANCE
// (Config.Instance), so two agent processes given one node name are two
// candidates. docs/site-leader.md states what that guarantees.
//
// Concurrency and lifetimes: Elector.Run blocks until its context ends
// and returns only after the leader-only components stopped (and, unless
// Config.KeepLeaseOnStop, after the Lease was released). Components are
// started with a context that ends with the term; FL and Installer are
// reused across terms; FL's late-adoption goroutine lives as long as its
// Run (one term). Ledger (it remembers the sequences it staged for the
// process's life: one uint64 an update) and Installer.Notify are safe for
// concurrent use. The caller owns and closes what it passed in (the FL
// client, the NATS connection, the trace store) after Run returned.
package site

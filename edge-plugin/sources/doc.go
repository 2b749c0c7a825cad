// Package sources holds what edge-scheduler (the EdgePolicy plugin and the
// HTTP extender) watches and trusts: the signed int8 model (ModelStore,
// with its rollback floor and age limit in a bbolt state file, loaded from
// a file or from a ConfigMap by ModelSource), and the JSON documents it
// reads from ConfigMaps through one Feed each: the site's service
// dependency graph (Dependencies), the site topology (Topology) and the
// scheduling policy (PolicyRules). It knows nothing of the scheduling
// framework: package serving reads what these hold on every cycle.
//
// Concurrency and lifetime:
//   - Every holder (ModelStore, Dependencies, Topology, PolicyRules) is
//     safe for concurrent use; readers load the current value with one
//     atomic load and never wait for an install. Installs are serialised
//     (a store's mutex, or the one Feed that writes a holder).
//   - StartModelSource, StartDependencies, StartTopology and StartPolicy
//     start one namespace-scoped informer each, living until the context
//     given ends; they wait (at most configMapSyncTimeout) for the first
//     list before returning, and return a function that blocks until the
//     informer stopped. ModelStore.Watch polls a file until its context
//     ends.
//   - A refused value (bad signature, rollback, malformed document) keeps
//     the last good one; a deleted ConfigMap clears a feed's value but
//     never the model in use. A model refused for a reason that may pass
//     (RefusalError.Transient: unreadable, or its rollback floor not
//     written) is offered again: by the file poller on its next poll, by
//     the ConfigMap source after a backoff.
package sources

// Package depgraph is the site leader's dependency-graph publisher
// (Publisher): every Interval it computes the service call graph the
// site's agents recorded (agent/trace, from the flows between pods) over
// a window, and writes it into the ConfigMap the
// scheduler plugin and extender read their dependency features from
// (kubefmt.DependencyGraph); with a GraphSAGE encoder (policy/sage) it
// writes the services' quantized embeddings and each service's partners
// beside it, so the scheduler only looks them up. docs/site-leader.md,
// "Service dependency graph", says what is written when.
//
// It is one of the leader-only components agent/site's Elector runs
// (a site.Component). Every write is an update of the ConfigMap read
// last (its resourceVersion), so no write overwrites another unseen; a
// ConfigMap that does not hold a valid graph is replaced.
//
// Concurrency and lifetimes: Run blocks until its context ends (once per
// leader term; a Publisher is reused across terms); Sync and SetWeights
// are safe for concurrent use with it and with each other. The caller
// owns the Client and the Trace and closes them after Run returned.
// Sync embeds with a private copy of the encoder's network; the
// Encoder and Decoder given in Config must not change while it runs.
package depgraph

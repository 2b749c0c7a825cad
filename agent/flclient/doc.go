// Package flclient is a site's federated-learning client: it follows the
// coordinator's round announcements and model notices (NATS KV), trains
// the round's base model in the site's twin (PPOTrainer), encodes the
// weight delta with the int8 codec and error feedback, signs it with the
// site's key, and keeps it in a bounded bbolt outbox until JetStream has
// stored it (published with an idempotency key, so retries cannot
// duplicate it). A failed publish, and a failed removal of an entry the
// stream has (a full disk), back off with capped jitter before the next
// attempt. It reads the state bucket and the model store
// with JetStream direct gets only (state.go: sites may not create
// consumers under the fleet's NATS permissions) and installs published
// models only after the trust rules of trust.go: signature by a trusted,
// unretired key, a version above the highest ever installed (kept in
// agent.db across restarts) and, optionally, a maximum age; it reports a
// frozen model feed. The previous model is kept as last known good.
// With a Sequencer (agent/site's ledger) the agents of one site share the
// sequence and hand unsent updates over to the next site leader (Adopt,
// Forget); adopted updates count against the outbox's limit under its
// policy like new ones (ErrOutboxFull when one finds no room).
//
// Lifetimes and concurrency: New opens agent.db; Run owns its goroutines
// (state reader, freeze check, worker, publisher, reporter) and returns
// when its context ends; Close after Run. Every durable change is one
// bbolt transaction, so a killed agent resumes with its outbox, sequence,
// residual and rollback floor intact.
package flclient

// Package flclient is a site's federated-learning client: it follows the
// coordinator's round announcements and model notices (NATS KV), trains
// the round's base model in the site's twin (PPOTrainer), encodes the
// weight delta with the int8 codec and error feedback, signs it with the
// site's key, and keeps it in a bounded bbolt outbox until JetStream has
// stored it (published with an idempotency key, so retries cannot
// duplicate it). It installs published models only after verifying their
// signature and that the version moves forward, keeping the previous one
// as last known good.
//
// Lifetimes and concurrency: New opens agent.db; Run owns three goroutines
// (state watcher, worker, publisher) and returns when its context ends;
// Close after Run. Every durable change is one bbolt transaction, so a
// killed agent resumes with its outbox, sequence and residual intact.
package flclient

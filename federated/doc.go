// Package federated is what the coordinator and the sites share.
//
// The wire protocol (protocol.go, docs/federated.md): versioned messages:
// round announcements and model notices (JSON, in the NATS KV bucket
// StateBucket), site updates (a binary envelope around a quant update,
// signed by the site's ed25519 key, published to the JetStream stream
// UpdateStream with an idempotency key) and the coordinator's acks. Every
// decoder is strict (size caps, unknown fields refused, versions checked,
// signatures verified before the payload is returned) and fuzzed. Registry
// holds the sites' public keys.
//
// Aggregation: NewAggregator(AggregatorConfig, dim) returns an Aggregator
// for FedAvg (streaming weighted mean; FedProx uses it server-side, its
// proximal term lives in client training), FedBuff (staleness-discounted,
// streaming), coordinate-wise median, trimmed mean, Krum and Multi-Krum;
// Add validates each Contribution (ErrContribution), Result is
// deterministic (ErrAggregate). ClipL2 and L2Norm bound update norms;
// DPConfig, AddNoise and Accountant give client-level DP-FedAvg (Gaussian
// noise on the mean of clipped deltas, conservative RDP accounting for full
// participation without subsampling).
//
// Concurrency: aggregators and accountants belong to one goroutine; a
// Registry is read-only once built and safe to share.
package federated

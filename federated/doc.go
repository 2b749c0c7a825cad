// Package federated will hold what coordinator and agents share: the
// versioned wire protocol (round announcements, updates, acks, model
// notices; subjects, JetStream streams, KV and Object Store layout), strict
// fuzzed decoders, and the aggregation rules (FedAvg, FedProx, FedBuff,
// coordinate-wise median, trimmed mean, Krum), norm clipping and
// client-level differential privacy.
//
// Nothing is implemented yet; see the project's open issues.
package federated

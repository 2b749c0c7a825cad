// Package coordinator will hold edge-coordinator, the cloud side of
// federated learning: the round manager (synchronous rounds with deadline
// and quorum, or buffered asynchronous aggregation), the aggregation driver,
// the bbolt model registry with per-site high-water marks and an audit log,
// model signing, the NATS micro-service admin API and Prometheus metrics.
//
// Nothing is implemented yet; see the project's open issues.
package coordinator

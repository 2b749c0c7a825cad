// Package test holds the end-to-end tests (test/e2e: kine + the real
// kube-apiserver + edge-scheduler on loopback, a real NATS server), the
// federated-learning protocol tests (test/fl) and the fault-injection
// suite (test/chaos, docs/chaos.md: a TCP proxy that delays, drops and
// cuts links, kill -9 of agents, coordinator and NATS, disk-full and clock
// skew, with a history checker). Helpers they share live in
// test/internal: netfault (the fault proxy), boltcheck (bbolt's
// consistency check) and gobuild (building programs to run as processes).
package test

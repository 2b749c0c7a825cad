// Package test will hold the end-to-end tests (test/e2e: kine + the real
// kube-apiserver + edge-scheduler on loopback, a real NATS server) and the
// fault-injection suite (test/chaos: a TCP proxy that delays, drops and cuts
// links, kill -9 of agents, coordinator and NATS, disk-full and clock skew,
// with a history checker).
//
// Nothing is implemented yet; see the project's open issues.
package test

// Package natstest runs embedded nats-servers and test connections to
// them: a server on a random loopback port (Port -1) stopped at the
// test's cleanup, and a client that reconnects forever. It imports nothing
// of edgesched, so any package's tests may use it (fltest, which builds
// coordinators and fleets on it, cannot serve the coordinator's own).
//
// Servers and connections belong to the test that started them; both are
// safe for concurrent use, as nats-server and nats.go are.
package natstest

// Package chaos is edgesched's fault-injection suite (TestChaos): a real
// NATS server with JetStream on a file store, the edge-coordinator
// process and N site agents as processes (cmd/chaos-agent: the real FL
// client with its bbolt outbox), each agent behind its own TCP proxy
// (test/internal/netfault). A seeded scheduler mixes faults while rounds
// run: link delay, drop, cut and reset; kill -9 and restart of agents,
// the coordinator (also at its failpoints) and the NATS server; a full
// disk under an agent's outbox (a small tmpfs per agent); clock skew on
// agents; malformed and forged messages. Afterwards every link heals,
// agents stop making updates and drain, and a checker
// (test/chaos/internal/history) holds what every agent wrote against
// what the coordinator recorded: no update lost or applied twice, model
// versions only increasing, the coordinator's bbolt file consistent
// after every crash, no process crashed.
//
// `go test ./test/chaos/` runs a short version (8 agents, 45 s of
// faults); `make chaos` the long one (50 agents, 15 minutes). Sizes,
// seed and fault kinds come from EDGESCHED_CHAOS_* variables; docs/chaos.md
// has them all, what each fault does and how to read the summary.
package chaos

// Package chaosagent is the chaos suite's site agent: a process that runs
// the real federated-learning client (agent/flclient, with its bbolt
// outbox) for one site, trains with a cheap seeded synthetic trainer, and
// records in a history file (test/chaos/internal/history) every update it
// is about to write to its outbox, every update that leaves it, every
// model it installs, and its durable state at start and at a clean stop.
// cmd/chaos-agent is its main.
//
// How it observes the client without changing it: it passes the client a
// Sequencer (flclient.Config.Sequencer, the hook a multi-agent site uses
// to share its sequence) that hands out the same sequence the client
// would use on its own (its newest plus one) and records Stage ("staged",
// before the outbox write) and Done ("done"); and an OnModel hook
// ("installed").
//
// Faults it takes part in: it is killed with SIGKILL and restarted on the
// same data directory; its data directory may be a small tmpfs that the
// suite fills (a store it cannot open is retried with backoff, not a
// reason to exit); --clock-skew offsets the client's clock (Config.Now:
// model freshness and freeze checks, install times; update headers and
// history records keep the real clock). SIGUSR1 quiesces it: it makes no
// new updates but keeps delivering its outbox and installing models.
//
// Lifetimes: Main runs until its context ends (SIGTERM or SIGINT in
// cmd/chaos-agent), then stops the client, records the final state and
// returns 0; any error before that returns 1.
package chaosagent

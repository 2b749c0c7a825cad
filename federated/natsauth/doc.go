// Package natsauth is the fleet's NATS authentication and authorisation:
// who may connect (one NKey per identity: the coordinator, each operator,
// each site), what each may publish and subscribe to (SitePermissions,
// CoordinatorPermissions, AdminPermissions), and the nats-server
// configuration that enforces it (RenderAuthorization, RenderServer),
// generated from a registry of identities (Fleet, fleet.json) rather
// than written by hand.
//
// A site may publish only its own updates and status, receive only its
// own acks and inbox replies, and read — never write — the round state
// and the models, through JetStream direct gets only: it may not create
// consumers, because a push consumer delivers to whatever subject its
// creator names, with the server's own rights (SitePermissions explains
// the attack). docs/security.md lists every rule; natsauth_test.go tries
// each forbidden action against a real nats-server with TLS and the
// generated configuration.
//
// Dir manages a fleet directory (registry, secrets, derived files) for
// the 'edgectl auth' verbs; ClientConfig turns seed, credentials and TLS
// files into nats.Connect options for the agent, the coordinator and
// edgectl; DevPKI makes a throwaway CA and certificates for tests and
// demos.
//
// Key material comes from crypto/rand (Dir.Rand may substitute a reader
// in tests); it is never derived from a seed that is printed or stored.
//
// Concurrency and lifetimes: functions hold no state. A Fleet is a plain
// value owned by one goroutine. Dir methods take an exclusive flock on the
// directory, so concurrent edgectl invocations serialise; every change
// commits fleet.json with one atomic rename and then reconciles the
// derived files idempotently (a crash is repaired by running again).
package natsauth

// Package bus is edge-coordinator's side of NATS JetStream
// (docs/federated.md "NATS layout"): it checks the server, creates the
// update stream with its limits, the state bucket and the model store
// (Setup; SetupRetry while the server is not ready, Transient), and opens
// the coordinator's durable consumer of the update stream — reset to its
// ack floor after a restart (OpenConsumer), or a highly available
// active's own consumer starting after its checkpoint (OpenEpochConsumer);
// Gone tells a fetch loop whose consumer was deleted (ErrConsumerGone);
// Fetch makes the pull requests of every update and regional consumer
// (ingest's, a region's, the regional stream's), each bounded in bytes
// (FetchBytes) and in time (FetchWait).
// What goes over the bus (announcements, models, acks) and when the
// stream is trimmed are package coordinator's.
//
// Concurrency and lifetimes: the functions start no goroutine and keep no
// state; a Bus is the handles of one NATS connection, safe for concurrent
// use as the nats.go and jetstream clients are, and valid while that
// connection is open (the coordinator drops its Bus when Run returns).
package bus

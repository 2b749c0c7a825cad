// Package netfault is a TCP relay for fault-injection tests: it sits
// between clients and a server (an agent and NATS) and can add latency,
// stall the link (a black hole: nothing is forwarded, connections stay
// open, like a WAN that drops every packet), cut it (every relayed
// connection closed and new ones refused), reset it (every connection
// closed once, new ones welcome) and heal it, all with real sockets.
//
// Concurrency and lifetimes: a Proxy's methods are safe for concurrent
// use. New starts an accept goroutine, and every relayed connection owns
// four goroutines (a reader and a writer per direction); Close stops them
// all and waits for them. Bytes are never dropped or reordered within a
// connection: a stall holds them back (the reader stops reading, so the
// kernel's buffers fill and the sender blocks), a delay holds each chunk
// until its due time without lowering throughput, a cut or a reset closes
// the connection.
package netfault

// Package admin is edge-coordinator's admin API on NATS (a micro
// service, federated.AdminService, subjects federated.AdminSubjectPrefix
// + "." + an Endpoint* name): the endpoints' names, their request and
// answer types, and Serve, which answers each endpoint from a Backend
// (the coordinator: var _ admin.Backend in package coordinator). edgectl
// speaks it.
//
// Concurrency and lifetimes: Serve registers the endpoints and returns
// the service; the NATS connection's goroutines call the Backend, one
// request at a time per endpoint but endpoints concurrently, so a Backend
// is safe for concurrent use. Each request gets a context of at most two
// minutes, derived from Serve's: when that ends, requests under way are
// cancelled and later ones answered 503. The caller stops the service
// (Stop) before the Backend goes away.
package admin

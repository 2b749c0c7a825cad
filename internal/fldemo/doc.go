// Package fldemo runs the whole federated system on one machine: an
// embedded NATS server with JetStream, the coordinator, and one FL client
// per simulated site, each site training the policy with PPO in its own
// twin (a different edge scenario). After the federated rounds it trains
// every site alone for the same number of rounds and compares the
// federated policy, the locally trained ones and baseline schedulers on
// every site's held-out workloads. `edgectl demo` calls Run.
//
// Run owns every goroutine, server and database it starts and stops them
// before it returns; a Config must not be shared by concurrent Runs with
// the same Out directory.
package fldemo

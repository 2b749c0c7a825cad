// Package fltest starts the real parts that federated-learning tests run
// against: an embedded JetStream nats-server on a random loopback port
// (StartNATS, RunServer), one configured by natsauth for a fleet
// directory with NKey users, permissions and mutual TLS (FleetDir,
// StartAuthServer), connections to it (Connect), and the real coordinator
// on a bbolt store in a test's temporary directory (CoordinatorConfig,
// RunCoordinator), with the small model, calibration rows, keyring and
// polling helpers those tests share.
//
// It is for tests only: it calls t.Fatal and registers t.Cleanup, and no
// non-test file may import it (TestOnlyTestsImport checks the module's
// packages with the go command). It lives under internal/ rather than
// test/ so that tests of agent/site and internal/coordcmd can import it
// as well as those under test/.
//
// Concurrency and lifetimes: every function must be called from the
// goroutine running the test (t.Fatal). What a function starts lives until
// the test's cleanup, which stops it in the reverse order of starting
// (t.Cleanup's order): a coordinator stops before its connection closes,
// and that before its server shuts down. RunCoordinator also returns a
// stop function for tests that stop the coordinator earlier; calling it
// again, or letting the cleanup call it, does nothing more.
package fltest

// Package edgectltest helps the tests of edgectl's packages drive the
// whole command tree: Run executes edgectl with arguments, KeyDir makes a
// signing key pair with it, and AdminFleet is an embedded NATS server
// with a real coordinator and one site for the admin verbs.
//
// It imports the root package edgectl, so only external test packages
// (package x_test) of edgectl's subpackages can use it. Each Run builds a
// fresh command tree. An AdminFleet and its directories live until the
// test's cleanup.
package edgectltest

// Package deplist checks what a program links, for the tests that keep
// the released binaries small (internal/agentcmd, internal/schedcmd): it
// lists the program's dependencies with the go command, under the build
// tags the Makefile releases it with, and reports every forbidden one.
//
// Its functions call t.Fatal on setup failures and t.Error per forbidden
// package; they run the go command in the test's working directory.
package deplist

// Package adminclient is edgectl's client of edge-coordinator's admin API
// over NATS (package coordinator/admin): the flags every admin verb has
// (Flags: the nats CLI's connection flags, --timeout, -o), one request and
// its JSON answer (Flags.Call), the table or document of the answer
// (Flags.Print) and the formatting the admin tables share (Ago, Dash,
// VersionArg). The verbs are package fleet's (round, sites, replicas,
// regions) and package model's (list, show, promote, rollback).
//
// Each Call connects, sends one request and closes the connection before
// it returns; nothing outlives it. A Flags belongs to one command and
// resolves its connection on each Call, so it is not safe for concurrent
// use.
package adminclient

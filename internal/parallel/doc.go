// Package parallel runs the iterations of a loop on several goroutines.
//
// For blocks until every call has returned; the goroutines it starts are
// its own and end with it. fn is called concurrently, once for each i:
// it must be safe for that (each call writing only what belongs to its i).
package parallel

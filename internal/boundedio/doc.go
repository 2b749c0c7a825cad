// Package boundedio is the one way edgesched's programs read their input
// files: every read has a size cap, a reader of rows (CSV) has a row cap,
// and both refuse what is over the cap with an error naming the file and
// the cap rather than cutting the input short. Paths must name regular
// files: a FIFO, a device or a socket would block without end or never
// end (/dev/zero), so it is refused before it is opened. Reads honour a
// context (Ctrl-C and SIGTERM in the programs).
//
// Stdin (ReadAll on os.Stdin) cannot be refused: it is read with the cap,
// and a read blocked on it is abandoned when the context ends (the call
// returns the context's error at once; the goroutine doing the read, which
// ReadAll owns, returns at the next byte or end of stdin — at the latest
// when the process exits).
//
// The functions hold no state and are safe for concurrent use.
package boundedio

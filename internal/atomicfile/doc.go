// Package atomicfile writes whole files so that a reader, or the same
// program after a crash, sees either the old content or the new one,
// never a part: the bytes go to a temporary file in the same directory,
// created with its mode (less the umask), synced and renamed over the
// target; the directory is then synced so the rename survives a power
// cut.
//
// Write is safe for concurrent use on different paths; concurrent writes
// of one path leave one of them whole.
package atomicfile

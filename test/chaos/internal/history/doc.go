// Package history is the chaos suite's record of what each agent did and
// the checker that holds it against what the coordinator recorded.
//
// Every chaos agent appends JSON lines to its history file (Writer): at
// start and clean stop its durable state, before each outbox write the
// update's sequence ("staged": the write may still fail, e.g. on a full
// disk), when an update leaves the outbox ("done"), and each model
// version it installs. One record is one write(2) of one line, so a
// kill -9 never leaves half a record (only a short write on a full disk
// could, and Read reports it). The file lives outside the agent's data
// directory so a full outbox disk does not stop the record.
//
// Check compares the histories with the coordinator's verdicts (read
// from its audit log, ReadCoordinator) and counts: updates written,
// applied (accepted once), refused with a reason, still pending, lost
// (none of these), applied twice, model versions that went back, and the
// latency from outbox write to acceptance.
//
// Concurrency: a Writer is safe for concurrent use; everything else is
// plain data.
package history

package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Events of a history.
const (
	// EvStart: the agent started; State is what its store held.
	EvStart = "start"
	// EvStaged: the client is about to write update Seq (trained for
	// Round from BaseVersion) to its outbox.
	EvStaged = "staged"
	// EvDone: update Seq left the outbox (the stream stored it, the
	// outbox dropped it when full, or its write failed after staging).
	EvDone = "done"
	// EvInstalled: model Version (of Round, int8 model Model) installed.
	EvInstalled = "installed"
	// EvStop: the agent stopped cleanly; State is its final store.
	EvStop = "stop"
)

// MaxLine bounds one record; longer lines are refused.
const MaxLine = 1 << 20

// ErrRecord wraps every refusal of a history line.
var ErrRecord = errors.New("history: bad record")

// State is an agent's durable state (its agent.db) at start or stop.
type State struct {
	// Seq is the newest sequence written to the outbox.
	Seq uint64 `json:"seq"`
	// Outbox lists the sequences still waiting, oldest first.
	Outbox []uint64 `json:"outbox"`
	// Installed is the installed model version (0: none).
	Installed uint64 `json:"installed"`
	// DroppedFull counts updates the outbox dropped or refused when full.
	DroppedFull int `json:"dropped_full"`
	// RefusedModels counts models refused, by reason.
	RefusedModels map[string]int `json:"refused_models,omitempty"`
	// Published counts updates the stream stored.
	Published int `json:"published"`
}

// Record is one line of a history.
type Record struct {
	T           time.Time `json:"t"`
	Ev          string    `json:"ev"`
	PID         int       `json:"pid,omitempty"`
	Seq         uint64    `json:"seq,omitempty"`
	Round       uint64    `json:"round,omitempty"`
	BaseVersion uint64    `json:"base_version,omitempty"`
	Version     uint64    `json:"version,omitempty"`
	Model       string    `json:"model,omitempty"`
	// SkewNS is the agent's clock offset (at start).
	SkewNS int64  `json:"skew_ns,omitempty"`
	State  *State `json:"state,omitempty"`
}

// validate names what is wrong with a decoded record.
func (r *Record) validate() error {
	if r.T.IsZero() {
		return fmt.Errorf("%w: no time", ErrRecord)
	}
	switch r.Ev {
	case EvStart, EvStop:
		if r.State == nil {
			return fmt.Errorf("%w: %s without state", ErrRecord, r.Ev)
		}
	case EvStaged, EvDone:
		if r.Seq == 0 {
			return fmt.Errorf("%w: %s without seq", ErrRecord, r.Ev)
		}
	case EvInstalled:
		if r.Version == 0 {
			return fmt.Errorf("%w: installed without version", ErrRecord)
		}
	default:
		return fmt.Errorf("%w: unknown event %q", ErrRecord, r.Ev)
	}
	return nil
}

// Decode parses one history line (without its newline).
func Decode(line []byte) (*Record, error) {
	if len(line) > MaxLine {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrRecord, len(line), MaxLine)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrRecord)
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Writer appends records to a history file.
type Writer struct {
	mu  sync.Mutex
	f   *os.File
	now func() time.Time
}

// Create opens (appending, creating) the history at path. now stamps
// records (nil: time.Now; the suite passes the real clock even for a
// skewed agent, so latencies compare across processes).
func Create(path string, now func() time.Time) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &Writer{f: f, now: now}, nil
}

// Write appends r (stamped now when r.T is zero) as one line, in one
// write call.
func (w *Writer) Write(r Record) error {
	if r.T.IsZero() {
		r.T = w.now().UTC()
	}
	b, err := jsonLine(r)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("history: write: %w", err)
	}
	return nil
}

// jsonLine encodes a valid record as one line.
func jsonLine(r Record) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return append(b, '\n'), nil
}

// Close closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
}

// Read decodes a whole history. A last line without its newline (a short
// write) is reported in torn and skipped; any other bad line is an error
// naming its line number.
func Read(r io.Reader) (recs []Record, torn bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// a long line: gather it, up to MaxLine
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= MaxLine {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			if len(buf) > MaxLine {
				return recs, false, fmt.Errorf("line %d: %w: longer than %d bytes", n, ErrRecord, MaxLine)
			}
			line = buf
		}
		if errors.Is(err, io.EOF) {
			return recs, len(line) > 0, nil
		}
		if err != nil {
			return recs, false, fmt.Errorf("line %d: %w", n, err)
		}
		rec, derr := Decode(bytes.TrimSuffix(line, []byte("\n")))
		if derr != nil {
			return recs, false, fmt.Errorf("line %d: %w", n, derr)
		}
		recs = append(recs, *rec)
	}
}

// ReadFile is Read of a file.
func ReadFile(path string) ([]Record, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}

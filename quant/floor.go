package quant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The rollback floor (docs/security.md): the highest model version a
// loader ever accepted, kept across restarts so that an older model, or
// the same version with another model ID, is refused (CheckNewer) even
// before anything is loaded. The scheduler plugin keeps one in its state
// file; the agent keeps one in agent.db for the highest version its site
// installed and another for the highest base version rounds announced
// (Accepted is then when that version was first seen). Both stores hold
// it as JSON: Floor.Encode writes it, DecodeFloor reads it.

// MaxFloorBytes bounds an encoded Floor: DecodeFloor refuses a longer
// record and Encode does not make one.
const MaxFloorBytes = 4096

// ErrFloor: a stored Floor record is malformed (DecodeFloor) or too long
// to store (Floor.Encode).
var ErrFloor = errors.New("quant: bad model floor record")

// Floor is the highest model version accepted, with its int8 model ID and
// when. Its JSON is {"version","model_id","accepted"}, the ID and time
// left out when empty.
type Floor struct {
	Version  uint64    `json:"version"`
	ModelID  string    `json:"model_id,omitempty"`
	Accepted time.Time `json:"accepted,omitzero"`
}

// floorJSON is what DecodeFloor reads: Floor's fields and the spellings
// the agent's model marks used before Floor (int8_model for model_id,
// seen for accepted), so that agent.db files written then still read.
// Version is a pointer to tell a missing version from version 0.
type floorJSON struct {
	Version  *uint64   `json:"version"`
	ModelID  string    `json:"model_id"`
	Int8     string    `json:"int8_model"`
	Accepted time.Time `json:"accepted"`
	Seen     time.Time `json:"seen"`
}

// Encode returns f's JSON, ErrFloor if it is longer than MaxFloorBytes
// (DecodeFloor would refuse it).
func (f Floor) Encode() ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFloor, err)
	}
	if len(b) > MaxFloorBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFloor, len(b), MaxFloorBytes)
	}
	return b, nil
}

// DecodeFloor parses a Floor record strictly: one JSON object of at most
// MaxFloorBytes naming its version, nothing after it, no field Floor does
// not have, and each field in one spelling only (model_id or the older
// int8_model, accepted or the older seen). Any other record is ErrFloor.
// It checks the shape only: what a floor must name (a version above 0,
// a full model ID) is for its reader to require.
func DecodeFloor(b []byte) (Floor, error) {
	var f Floor
	if len(b) > MaxFloorBytes {
		return f, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFloor, len(b), MaxFloorBytes)
	}
	var w floorJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return f, fmt.Errorf("%w: %v", ErrFloor, err)
	}
	if rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return f, fmt.Errorf("%w: trailing data after the record", ErrFloor)
	}
	if w.Version == nil {
		return f, fmt.Errorf("%w: no version", ErrFloor)
	}
	if w.ModelID != "" && w.Int8 != "" {
		return f, fmt.Errorf("%w: both model_id and int8_model", ErrFloor)
	}
	if !w.Accepted.IsZero() && !w.Seen.IsZero() {
		return f, fmt.Errorf("%w: both accepted and seen", ErrFloor)
	}
	f = Floor{Version: *w.Version, ModelID: w.ModelID, Accepted: w.Accepted}
	if w.Int8 != "" {
		f.ModelID = w.Int8
	}
	if !w.Seen.IsZero() {
		f.Accepted = w.Seen
	}
	return f, nil
}

package sim

import "fmt"

// LineError locates a problem in an input file: a CSV trace or a scenario.
type LineError struct {
	File string
	// Line is 1-based (a CSV header is line 1); 0 when unknown.
	Line int
	// Field names the column or the YAML path ("nodePools[2].cpuMilli"),
	// "" for the whole line.
	Field string
	Err   error
}

func (e *LineError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", loc, e.Err)
	}
	return fmt.Sprintf("%s: field %s: %v", loc, e.Field, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

package scenario

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/sim"
)

// pos remembers where a mapping and each of its keys sit in the file.
type pos struct {
	line int
	keys map[string]int
}

// at returns the line of a key, or of the mapping when the key is absent.
func (p pos) at(key string) int {
	if l, ok := p.keys[key]; ok {
		return l
	}
	return p.line
}

// maxYAMLNodes bounds the YAML document's size after alias expansion, so a
// small file of nested aliases ("billion laughs") cannot blow up decoding.
const maxYAMLNodes = 4_000_000

// expandedSize counts the nodes of n with aliases expanded, without
// expanding them (sizes are memoised per node); it stops early past limit
// and reports alias cycles.
func expandedSize(n *yaml.Node, limit int) (int, error) {
	memo := map[*yaml.Node]int{}
	visiting := map[*yaml.Node]bool{}
	var size func(n *yaml.Node) (int, error)
	size = func(n *yaml.Node) (int, error) {
		if v, ok := memo[n]; ok {
			return v, nil
		}
		if visiting[n] {
			return 0, &sim.LineError{Line: n.Line, Err: fmt.Errorf("%w: an alias refers to itself", ErrSyntax)}
		}
		visiting[n] = true
		total := 1
		kids := n.Content
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			kids = []*yaml.Node{n.Alias}
		}
		for _, k := range kids {
			v, err := size(k)
			if err != nil {
				return 0, err
			}
			total += v
			if total > limit {
				return 0, &sim.LineError{Line: n.Line, Err: fmt.Errorf("%w: over %d YAML nodes once aliases are expanded", ErrTooLarge, limit)}
			}
		}
		visiting[n] = false
		memo[n] = total
		return total, nil
	}
	return size(n)
}

// yamlFields lists the yaml keys of a struct type, sorted.
func yamlFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// strict decodes a mapping into v (a pointer to a struct), refusing unknown
// and duplicate keys with the line they are on, and records positions.
func strict(n *yaml.Node, v any, p *pos) error {
	if n.Kind != yaml.MappingNode {
		return &sim.LineError{Line: n.Line, Err: fmt.Errorf("%w: expected a mapping, got %s", ErrSyntax, kindName(n))}
	}
	allowed := yamlFields(reflect.TypeOf(v).Elem())
	p.line = n.Line
	p.keys = make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if _, dup := p.keys[k.Value]; dup {
			return &sim.LineError{Line: k.Line, Field: k.Value, Err: fmt.Errorf("%w: key given twice", ErrSyntax)}
		}
		if _, ok := slices.BinarySearch(allowed, k.Value); !ok {
			return &sim.LineError{Line: k.Line, Field: k.Value, Err: fmt.Errorf("%w: unknown field (allowed: %s)", ErrSyntax, strings.Join(allowed, ", "))}
		}
		p.keys[k.Value] = k.Line
	}
	if err := n.Decode(v); err != nil {
		return yamlErr(err)
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlErr turns a yaml library error into a *sim.LineError when it can.
func yamlErr(err error) error {
	var le *sim.LineError
	if errors.As(err, &le) {
		return err
	}
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		l, _ := strconv.Atoi(m[1])
		return &sim.LineError{Line: l, Err: fmt.Errorf("%w: %s", ErrSyntax, m[2])}
	}
	return &sim.LineError{Err: fmt.Errorf("%w: %s", ErrSyntax, strings.TrimPrefix(msg, "yaml: "))}
}

// Duration is a span of time written as seconds (an integer) or as a Go
// duration string ("90s", "15m", "24h").
type Duration int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &sim.LineError{Line: n.Line, Err: fmt.Errorf("%w: a duration must be a number of seconds or a string like 15m", ErrSyntax)}
	}
	var secs int64
	if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
		secs = v
	} else {
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			return &sim.LineError{Line: n.Line, Err: fmt.Errorf("%w: bad duration %q (want seconds or a string like 15m)", sim.ErrInvalid, n.Value)}
		}
		secs = int64(v / time.Second)
	}
	if secs < 0 || secs > sim.MaxTime {
		return &sim.LineError{Line: n.Line, Err: fmt.Errorf("%w: duration %q must be in [0, %d] s", sim.ErrInvalid, n.Value, int64(sim.MaxTime))}
	}
	*d = Duration(secs)
	return nil
}

// Seconds returns the duration in seconds.
func (d Duration) Seconds() int64 { return int64(d) }

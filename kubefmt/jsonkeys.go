package kubefmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jsonShape is the keys a JSON value may have: an object's fields (each
// with the shape of its value), or an array's elements. A nil shape is
// any value: scalars, or containers whose keys are not checked (only for
// repeats).
type jsonShape struct {
	fields map[string]*jsonShape // an object: exactly these keys
	elem   *jsonShape            // an array: each element's shape
}

// maxJSONDepth bounds the nesting checkKeys follows.
const maxJSONDepth = 64

// checkKeys walks the JSON tokens of b and refuses any object key that the
// shape does not name (case-sensitive), and any key given twice in one
// object: encoding/json alone would fold case and let a repeated key win.
// Values are left to the decoder.
func checkKeys(b []byte, root *jsonShape) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		object  bool
		shape   *jsonShape
		seen    map[string]bool
		key     bool // an object expecting a key next
		lastKey string
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string)
			if top.shape != nil && top.shape.fields != nil {
				if _, ok := top.shape.fields[k]; !ok {
					return fmt.Errorf("unknown field %q", k)
				}
			}
			if top.seen[k] {
				return fmt.Errorf("field %q given twice", k)
			}
			top.seen[k], top.lastKey, top.key = true, k, false
			continue
		}
		// a value: its shape is given by its container
		var shape *jsonShape
		switch {
		case top == nil:
			shape = root
		case top.shape == nil:
		case top.object:
			shape = top.shape.fields[top.lastKey]
		default:
			shape = top.shape.elem
		}
		if top != nil && top.object {
			top.key = true // inside an object, a key comes next
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				if shape != nil && shape.fields == nil {
					return errors.New("an object where an array or a value belongs")
				}
				stack = append(stack, &frame{object: true, shape: shape, seen: map[string]bool{}, key: true})
			case '[':
				if shape != nil && shape.elem == nil {
					return errors.New("an array where an object or a value belongs")
				}
				stack = append(stack, &frame{shape: shape})
			case ']':
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
			}
		}
		if len(stack) > maxJSONDepth {
			return errors.New("nested too deeply")
		}
	}
}

// decodeStrict decodes b, at most maxBytes, into v: one JSON object whose
// keys are exactly shape's (checkKeys), no unknown fields, nothing after
// it. Errors wrap sentinel.
func decodeStrict(b []byte, maxBytes int, shape *jsonShape, v any, sentinel error) error {
	if len(b) > maxBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", sentinel, len(b), maxBytes)
	}
	if err := checkKeys(b, shape); err != nil {
		return fmt.Errorf("%w: %v", sentinel, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", sentinel, err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return fmt.Errorf("%w: data after the object", sentinel)
	}
	return nil
}

// decodeValid is decodeStrict into a new T, then T's Encode, which
// validates it and refuses a canonical encoding over the size limit: so
// whatever decodes also encodes (a ConfigMap written from it fits).
func decodeValid[T any, PT interface {
	*T
	Encode() ([]byte, error)
}](b []byte, maxBytes int, shape *jsonShape, sentinel error) (*T, error) {
	var v T
	if err := decodeStrict(b, maxBytes, shape, &v, sentinel); err != nil {
		return nil, err
	}
	if _, err := PT(&v).Encode(); err != nil {
		return nil, err
	}
	return &v, nil
}

// encodeBounded marshals v (validated, in its canonical order) and
// refuses an encoding of more than maxBytes. Errors wrap sentinel, or
// name what for a value JSON cannot encode.
func encodeBounded(v any, maxBytes int, what string, sentinel error) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // names keep their bytes: "<" is not "\u003c"
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes encoded, at most %d", sentinel, len(b), maxBytes)
	}
	return b, nil
}

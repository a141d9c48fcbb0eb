package mcp

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// bindArguments sets in's fields from the call's arguments, which mcp-go
// has already decoded into a map, without encoding them to JSON and
// decoding them again as mcp.CallToolRequest.BindArguments does: that
// round trip was a real share of a small call (about 27 µs for the 4 KB
// of a write_file). Structs whose fields are all strings, booleans,
// numbers or lists of strings are bound here; any other shape goes
// through BindArguments. Arguments are already checked against the
// tool's schema, so a wrong type here is rare; it is still refused.
func bindArguments(req mcp.CallToolRequest, in any) error {
	v := reflect.ValueOf(in).Elem()
	fields, ok := flatFields(v.Type())
	if !ok {
		return req.BindArguments(in)
	}
	args, _ := req.Params.Arguments.(map[string]any)
	for _, f := range fields {
		raw, present := args[f.name]
		if !present || raw == nil {
			continue
		}
		if err := setField(v.Field(f.index), raw); err != nil {
			return fmt.Errorf("%s %w", f.name, err)
		}
	}
	return nil
}

// flatField is a field bindArguments sets: its index and JSON name.
type flatField struct {
	index int
	name  string
}

// flatCache maps a struct type to its fields, or to nil when it is not
// flat (bound by BindArguments).
var flatCache sync.Map

func flatFields(t reflect.Type) ([]flatField, bool) {
	if c, ok := flatCache.Load(t); ok {
		fs := c.([]flatField)
		return fs, fs != nil
	}
	var fs []flatField
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if !flatKind(sf.Type) {
			fs = nil
			break
		}
		fs = append(fs, flatField{index: i, name: name})
	}
	flatCache.Store(t, fs) // nil: not flat (or no fields), bound by BindArguments
	return fs, fs != nil
}

func flatKind(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return false
}

// setField stores raw, as encoding/json decodes a JSON value into an any,
// in f.
func setField(f reflect.Value, raw any) error {
	switch f.Kind() {
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			return fmt.Errorf("must be a string")
		}
		f.SetString(s)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			return fmt.Errorf("must be true or false")
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := raw.(float64)
		if !ok || n != math.Trunc(n) || f.OverflowInt(int64(n)) || math.Abs(n) > 1<<53 {
			return fmt.Errorf("must be a whole number")
		}
		f.SetInt(int64(n))
	case reflect.Float64:
		n, ok := raw.(float64)
		if !ok {
			return fmt.Errorf("must be a number")
		}
		f.SetFloat(n)
	case reflect.Slice:
		list, ok := raw.([]any)
		if !ok {
			return fmt.Errorf("must be a list of strings")
		}
		out := reflect.MakeSlice(f.Type(), len(list), len(list))
		for i, e := range list {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("must be a list of strings")
			}
			out.Index(i).SetString(s)
		}
		f.Set(out)
	}
	return nil
}

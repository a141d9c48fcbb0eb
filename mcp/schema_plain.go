package mcp

import (
	"encoding/json"
	"regexp"
)

// plainSchemas rewrites every nullable type in the tools' input and output
// schemas (`["null","array"]`, `["null","object"]`, which Go's nil slices
// and pointers produce) to the plain type. Strict clients and the MCP
// Inspector warn about nullable types as unportable. In output, warren
// never sends null for these fields instead: empty arrays and objects, or
// no field (the e2e tests validate every result against these schemas). In
// input, such a field is a plain optional one: left out of required, and
// omitted rather than null.
func plainSchemas(tools []Tool) []Tool {
	for i := range tools {
		tools[i].Tool.RawInputSchema = plainRawSchema(tools[i].Tool.RawInputSchema)
		s := &tools[i].Tool.OutputSchema
		for k, v := range s.Properties {
			s.Properties[k] = plainSchema(v)
		}
		for k, v := range s.Defs {
			s.Defs[k] = plainSchema(v)
		}
	}
	return tools
}

func plainSchema(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if types, ok := x["type"].([]any); ok {
			var kept []any
			for _, t := range types {
				if t != "null" {
					kept = append(kept, t)
				}
			}
			if len(kept) == 1 {
				x["type"] = kept[0]
			} else {
				x["type"] = kept
			}
		}
		for k, e := range x {
			x[k] = plainSchema(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = plainSchema(e)
		}
		return x
	}
	return v
}

// nullableType is a two-type array with "null" as encoding/json writes it
// (compact, the types sorted): quotes inside JSON strings are escaped, so
// it matches only the schema's own type keywords.
var nullableType = regexp.MustCompile(`"type":\["null","([a-z]+)"\]`)

// plainRawSchema rewrites a raw (compact, as mcp-go marshals it) input
// schema in place of its bytes, so that its property order is kept.
func plainRawSchema(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	return nullableType.ReplaceAll(raw, []byte(`"type":"$1"`))
}

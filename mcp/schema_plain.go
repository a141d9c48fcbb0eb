package mcp

// plainOutputSchemas rewrites every nullable type in the tools' output
// schemas (`["null","array"]`, `["null","object"]`, which Go's nil slices
// and pointers produce) to the plain type. Strict clients and the MCP
// Inspector warn about nullable types as unportable; warren never sends
// null for these fields instead: empty arrays and objects, or no field.
// The e2e tests validate every result against these schemas.
func plainOutputSchemas(tools []Tool) []Tool {
	for i := range tools {
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

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// argumentErrors validates every tool call's arguments against the tool's
// input schema before anything else of warren sees the call (no metric, no
// activity, no usage: as mcp-go's WithInputSchemaValidation did), and
// refuses bad ones in sentences a model can act on ("missing property
// 'command'") rather than the validator's ("<root>: &{Missing:[command]}").
//
// Each schema is compiled once, at start, and the arguments mcp-go already
// decoded are validated as they are. mcp-go's own validation hashed the
// schema, encoded the arguments and decoded them again on every call:
// about 13 µs of CPU per shell_exec, more than the rest of the checks of a
// call together.
type argumentErrors struct {
	compiled map[string]*jsonschema.Schema // tool name → its input schema; nil: not validated
}

func newArgumentErrors(tools []Tool) *argumentErrors {
	a := &argumentErrors{compiled: map[string]*jsonschema.Schema{}}
	for _, t := range tools {
		raw := t.Tool.RawInputSchema
		if len(raw) == 0 {
			in := t.Tool.InputSchema
			if in.Type == "" && len(in.Properties) == 0 && len(in.Required) == 0 && in.AdditionalProperties == nil {
				continue // no schema: nothing to validate
			}
			raw, _ = json.Marshal(in)
		}
		a.compiled[t.Tool.Name] = compileSchema(t.Tool.Name, raw) // a schema that does not compile validates nothing
	}
	return a
}

// validate is a tool middleware: a call whose arguments do not match the
// tool's input schema gets a tool error saying what is wrong.
func (a *argumentErrors) validate(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		schema := a.compiled[req.Params.Name]
		if schema == nil {
			return next(ctx, req)
		}
		// The object mcp-go decoded is what the validator reads (strings,
		// float64 numbers, maps, slices): most calls pass here.
		switch args := req.Params.Arguments.(type) {
		case map[string]any:
			if schema.Validate(args) == nil {
				return next(ctx, req)
			}
		case nil:
			if schema.Validate(map[string]any{}) == nil {
				return next(ctx, req)
			}
		}
		// Refused, or arguments of another type: decide again as mcp-go's
		// validation did, on the arguments encoded and decoded as JSON.
		value, err := jsonValue(req.Params.Arguments)
		if err != nil {
			return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
		}
		if err := schema.Validate(value); err != nil {
			return mcp.NewToolResultError(explain(req.Params.Name, err)), nil
		}
		return next(ctx, req)
	}
}

// jsonValue is args encoded as JSON and decoded as the validator does
// (numbers as json.Number); no arguments are an empty object.
func jsonValue(args any) (any, error) {
	if args == nil {
		return map[string]any{}, nil
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// explain says what is wrong with a tool's arguments, from the
// validator's error.
func explain(tool string, err error) string {
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return "input schema validation failed: " + err.Error()
	}
	p := message.NewPrinter(language.English)
	var parts []string
	var walk func(*jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) > 0 {
			for _, c := range v.Causes {
				walk(c)
			}
			return
		}
		msg := v.ErrorKind.LocalizedString(p)
		if len(v.InstanceLocation) > 0 {
			msg = "argument " + strings.Join(v.InstanceLocation, ".") + ": " + msg
		}
		parts = append(parts, msg)
	}
	walk(verr)
	return "invalid arguments for " + tool + ": " + strings.Join(parts, "; ") +
		". Check them against the tool's input schema (tools/list) and call again."
}

// compileSchema compiles a tool's input schema, or returns nil.
func compileSchema(tool string, raw []byte) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil
	}
	c := jsonschema.NewCompiler()
	url := "mem:///warren/" + tool + ".json"
	if c.AddResource(url, doc) != nil {
		return nil
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil
	}
	return s
}

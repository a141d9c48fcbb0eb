package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// argumentErrors rewrites mcp-go's input-schema validation failures, which
// read like "<root>: &{Missing:[command]}", into sentences a model can act
// on: "missing property 'command'". mcp-go validates before any handler
// runs, so this happens in its after-call hook, where the result can still
// be changed.
type argumentErrors struct {
	schemas map[string][]byte // tool name → input schema JSON

	mu       sync.Mutex // guards compiled
	compiled map[string]*jsonschema.Schema
}

// validationPrefix starts every message of mcp-go's input validation.
const validationPrefix = "input schema validation failed"

func newArgumentErrors(tools []Tool) *argumentErrors {
	a := &argumentErrors{schemas: map[string][]byte{}, compiled: map[string]*jsonschema.Schema{}}
	for _, t := range tools {
		raw := t.Tool.RawInputSchema
		if len(raw) == 0 {
			raw, _ = json.Marshal(t.Tool.InputSchema)
		}
		a.schemas[t.Tool.Name] = raw
	}
	return a
}

// afterCallTool is an mcp-go OnAfterCallTool hook.
func (a *argumentErrors) afterCallTool(_ context.Context, _ any, req *mcp.CallToolRequest, result any) {
	res, ok := result.(*mcp.CallToolResult)
	if !ok || res == nil || !res.IsError || len(res.Content) != 1 {
		return
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok || !strings.HasPrefix(tc.Text, validationPrefix) {
		return
	}
	if msg := a.explain(req.Params.Name, req.Params.Arguments); msg != "" {
		res.Content[0] = mcp.NewTextContent(msg)
	}
}

// explain validates args against the tool's schema and says what is wrong,
// or returns "" when it cannot tell.
func (a *argumentErrors) explain(tool string, args any) string {
	schema := a.schema(tool)
	if schema == nil {
		return ""
	}
	raw, err := json.Marshal(args)
	if err != nil || args == nil {
		raw = []byte("{}")
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "invalid arguments for " + tool + ": they are not a JSON object"
	}
	err = schema.Validate(value)
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return ""
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

func (a *argumentErrors) schema(tool string) *jsonschema.Schema {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.compiled[tool]; ok {
		return s
	}
	raw, ok := a.schemas[tool]
	if !ok {
		return nil
	}
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
	a.compiled[tool] = s
	return s
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// outputSchemas compiles each tool's outputSchema from tools/list, once
// per client, so that every successful result an e2e test sees is checked
// against what the server promises: a schema a strict client (the MCP
// Inspector's strict mode, typed SDKs) would enforce.
type outputSchemas struct {
	once    sync.Once
	schemas map[string]*jsonschema.Schema
	err     error
}

func (c *client) checkOutput(t testing.TB, name string, structured any) {
	t.Helper()
	c.outputs.once.Do(func() {
		c.outputs.schemas = map[string]*jsonschema.Schema{}
		tools, err := c.cs.ListTools(context.Background(), nil)
		if err != nil {
			c.outputs.err = err
			return
		}
		comp := jsonschema.NewCompiler()
		for _, tool := range tools.Tools {
			if tool.OutputSchema == nil {
				continue
			}
			raw, err := json.Marshal(tool.OutputSchema)
			if err != nil {
				c.outputs.err = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytesReader(raw))
			if err != nil {
				c.outputs.err = err
				return
			}
			url := "mem://" + tool.Name
			if err := comp.AddResource(url, doc); err != nil {
				c.outputs.err = err
				return
			}
			s, err := comp.Compile(url)
			if err != nil {
				c.outputs.err = fmt.Errorf("compile the output schema of %s: %w", tool.Name, err)
				return
			}
			c.outputs.schemas[tool.Name] = s
		}
	})
	if c.outputs.err != nil {
		t.Fatalf("output schemas: %v", c.outputs.err)
	}
	s, ok := c.outputs.schemas[name]
	if !ok {
		return
	}
	// Validate what went over the wire, decoded generically.
	raw, err := json.Marshal(structured)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytesReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("%s returned a result its outputSchema does not allow: %v\n%s", name, err, raw)
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

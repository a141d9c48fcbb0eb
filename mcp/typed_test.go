package mcp

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// A tool error is never empty: an error without a message still says
// that something failed.
func TestToolErrorsAreNeverEmpty(t *testing.T) {
	h := typedHandler(func(context.Context, mcp.CallToolRequest, struct{}) (result[struct{}], error) {
		return result[struct{}]{}, errors.New("")
	})
	res, err := h(context.Background(), mcp.CallToolRequest{})
	if err != nil || !res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "failed") {
		t.Errorf("tool error text %q", text)
	}
}

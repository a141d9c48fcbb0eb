package mcp

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestJSONTextValid(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"a":"plain é \u00e9 \n \" \\"}`, true},
		{`"\ud83d\ude00"`, true},
		{`"\uD83D\uDE00"`, true},
		{`"\ufffd"`, true},
		{`"\\ud800"`, true}, // an escaped backslash, then text
		{`"\\\ud800"`, false},
		{`"\ud800"`, false},
		{`"\udcff"`, false},
		{`"\ude00\ud83d"`, false},
		{`"\ud83d\u0041"`, false},
		{`"\ud83d"`, false},
		{`"\ud83d\ud83d\ude00"`, false},
		{"\"a\xffb\"", false},
		{"\"\xed\xa0\x80\"", false}, // a surrogate encoded in UTF-8 is not UTF-8
	} {
		if got := jsonTextValid([]byte(tc.in)); got != tc.want {
			t.Errorf("jsonTextValid(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestInvalidTextArgumentNamesTheArgument(t *testing.T) {
	var req mcp.CallToolRequest
	if err := json.Unmarshal([]byte(`{"params":{"name":"edit_file","arguments":{"path":"a","old_text":"x","new_text":"\udcff"}}}`), &req); err != nil {
		t.Fatal(err)
	}
	if got := invalidTextArgument(req); got != "new_text" {
		t.Errorf("from the wire: %q, want new_text", got)
	}
	// In-process callers pass Go strings, which may hold any bytes.
	req = mcp.CallToolRequest{Params: mcp.CallToolParams{Arguments: map[string]any{"path": "a\xff", "content": "ok"}}}
	if got := invalidTextArgument(req); got != "path" {
		t.Errorf("in process: %q, want path", got)
	}
	req.Params.Arguments = map[string]any{"path": "a", "content": "\uFFFD is a character"}
	if got := invalidTextArgument(req); got != "" {
		t.Errorf("valid arguments: %q", got)
	}
}

func TestSliceBytes(t *testing.T) {
	data := []byte("0123456789")
	for _, tc := range []struct {
		offset, limit int
		want          string
		truncated     bool
	}{
		{0, 0, "MDEyMzQ1Njc4OQ==", false},
		{3, 2, "MjM=", true},
		{10, 5, "OQ==", false},
		{11, 1, "", false},
	} {
		got := sliceBytes(data, tc.offset, tc.limit)
		if got.Content != tc.want || got.Truncated != tc.truncated || got.TotalBytes != 10 || got.Encoding != "base64" {
			t.Errorf("sliceBytes(%d, %d) = %+v", tc.offset, tc.limit, got)
		}
	}
}

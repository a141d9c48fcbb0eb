package mcp

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestStdioCompatPassesLinesThrough: every line but an enveloped
// logging/setLevel reaches mcp-go byte for byte, long lines too, whatever
// the reads' sizes.
func TestStdioCompatPassesLinesThrough(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"content":"` +
		strings.Repeat("setLevel ", 20000) + `"}}}` + "\n"
	enveloped := `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"level":"info"}}` + "\n"
	legacy := `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"debug"}}` + "\n"
	tail := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}` // no newline at the end
	in := long + enveloped + legacy + tail
	got, err := io.ReadAll(iotest.OneByteReader(newStdioCompat(strings.NewReader(in))))
	if err != nil {
		t.Fatal(err)
	}
	want := long + `{"id":2,"jsonrpc":"2.0","method":"logging/setLevel","params":{"_meta":{},"level":"info"}}` + "\n" + legacy + tail
	if string(got) != want {
		t.Fatalf("got %d bytes, want %d; the setLevel line: %q", len(got), len(want), strings.Split(string(got), "\n")[1])
	}
}

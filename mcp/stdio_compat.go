package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"

	"github.com/mark3labs/mcp-go/mcp"
)

// stdioCompat is the stdio counterpart of modernCompat (http_protocol.go)
// for logging/setLevel: the 2026-07-28 revision removed the method (a
// request names its level in _meta), and mcp-go answers it "method not
// found" when it carries the revision's envelope. warren honours the
// method in every revision, so such a request reaches mcp-go without the
// revision in its envelope, as the request of an earlier revision: mcp-go
// answers it and warren's AfterSetLevel hook keeps the level for the
// connection, which notify applies to requests that name no level.
//
// Every other line passes through as it is; only lines that mention
// setLevel are parsed.
type stdioCompat struct {
	r       *bufio.Reader
	pending []byte      // the rest of the current line
	calls   *stdioCalls // serves tool calls beside mcp-go (stdio_direct.go); nil: none
}

func newStdioCompat(in io.Reader) *stdioCompat {
	return &stdioCompat{r: bufio.NewReaderSize(in, 64<<10)}
}

func (c *stdioCompat) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		line, err := c.r.ReadSlice('\n')
		if err == nil && c.calls != nil && c.calls.take(line) {
			continue // a tool call, served beside mcp-go
		}
		if err != nil && err != bufio.ErrBufferFull && len(line) == 0 && c.calls != nil {
			c.calls.end() // the input ended: as mcp-go's, the calls in flight end
		}
		switch {
		case err == bufio.ErrBufferFull:
			// A long line (write_file's contents): it passes as it is,
			// in pieces; no setLevel is that long.
			c.pending = line
		case err != nil && len(line) == 0:
			return 0, err
		case bytes.Contains(line, []byte("setLevel")):
			c.pending = withoutModernEnvelope(line)
		default:
			c.pending = line
		}
		if err == bufio.ErrBufferFull {
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			if len(c.pending) > 0 {
				c.pending = append([]byte(nil), c.pending...) // ReadSlice's buffer is reused
			}
			return n, nil
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	if len(c.pending) > 0 {
		c.pending = append([]byte(nil), c.pending...)
	}
	return n, nil
}

// withoutModernEnvelope returns a logging/setLevel request line without the
// 2026-07-28 protocol version in its _meta; any other line unchanged.
func withoutModernEnvelope(line []byte) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return line
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || method != string(mcp.MethodSetLogLevel) {
		return line
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return line
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(params["_meta"], &meta) != nil {
		return line
	}
	var version string
	_ = json.Unmarshal(meta[mcp.MetaKeyProtocolVersion], &version)
	if !mcp.IsModernProtocol(version) {
		return line
	}
	delete(meta, mcp.MetaKeyProtocolVersion)
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return line
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return line
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return append(out, '\n')
}

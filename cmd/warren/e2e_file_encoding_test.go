package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawStdio speaks JSON-RPC to 'warren serve stdio' byte for byte: an SDK
// client would encode its strings as valid UTF-8 and never send what a
// careless or hostile client can (raw invalid bytes, lone surrogates).
type rawStdio struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func serveRaw(t *testing.T, args ...string) *rawStdio {
	t.Helper()
	cmd := exec.Command(warrenBin, append([]string{"serve", "stdio"}, args...)...)
	cmd.Stderr = &testLog{t: t, prefix: "server: "}
	in, err := cmd.StdinPipe()
	must(t, err)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	})
	r := &rawStdio{t: t, in: in, out: bufio.NewReader(out)}
	r.request("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

// request sends a request whose params are the raw JSON text params and
// returns the result of the response with the same id.
func (r *rawStdio) request(method, params string) json.RawMessage {
	r.t.Helper()
	r.id++
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", r.id, method, params)
	if _, err := io.WriteString(r.in, line); err != nil {
		r.t.Fatal(err)
	}
	for {
		b, err := r.out.ReadBytes('\n')
		if err != nil {
			r.t.Fatalf("%s: no response: %v", method, err)
		}
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(b, &msg) != nil || msg.ID != r.id {
			continue // a notification
		}
		if msg.Error != nil {
			r.t.Fatalf("%s: protocol error %s", method, msg.Error)
		}
		return msg.Result
	}
}

// call calls tool with args, raw JSON text, and returns whether it was a
// tool error, its text and its structured content.
func (r *rawStdio) call(tool, args string) (bool, string, map[string]any) {
	r.t.Helper()
	var res struct {
		IsError           bool             `json:"isError"`
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
	}
	raw := r.request("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, tool, args))
	if err := json.Unmarshal(raw, &res); err != nil {
		r.t.Fatalf("%s: %v in %s", tool, err, raw)
	}
	var text strings.Builder
	for _, c := range res.Content {
		fmt.Fprint(&text, c["text"])
	}
	return res.IsError, text.String(), res.StructuredContent
}

// TestWriteFileRefusesInvalidUTF8AndTakesBase64: text that is not UTF-8
// (raw bytes in the JSON, or an escaped lone surrogate, which JSON decoders
// turn into U+FFFD) is refused with a message that points to base64 instead
// of being written with replacement characters; base64 content is written
// byte for byte and read back the same way.
func TestWriteFileRefusesInvalidUTF8AndTakesBase64(t *testing.T) {
	needJail(t)
	ws := jailDir(t)
	srv := serveRaw(t, "--workspace", ws, "--data-dir", jailDir(t))
	const hint = `content is not valid UTF-8: send binary data with encoding "base64"`
	for name, args := range map[string]string{
		"raw byte":        "{\"path\":\"bad1.txt\",\"content\":\"a\xffb\"}",
		"lone high":       `{"path":"bad2.txt","content":"a\ud800b"}`,
		"lone low":        `{"path":"bad3.txt","content":"a\udcffb"}`,
		"reversed pair":   `{"path":"bad4.txt","content":"\ude00\ud83d"}`,
		"high at the end": `{"path":"bad5.txt","content":"ab\ud83d"}`,
		"append":          `{"path":"bad6.txt","content":"\udcff","append":true}`,
	} {
		isErr, text, _ := srv.call("write_file", args)
		if !isErr || !strings.Contains(text, hint) {
			t.Errorf("%s: want a tool error containing %q, got %v %q", name, hint, isErr, text)
		}
	}
	isErr, text, _ := srv.call("edit_file", `{"path":"x","old_text":"a","new_text":"\udcff"}`)
	if !isErr || !strings.Contains(text, `new_text is not valid UTF-8`) {
		t.Errorf("edit_file with a lone surrogate: %v %q", isErr, text)
	}
	isErr, text, _ = srv.call("write_file", "{\"path\":\"p\xff.txt\",\"content\":\"x\"}")
	if !isErr || !strings.Contains(text, "path is not valid UTF-8") {
		t.Errorf("write_file to a path that is not UTF-8: %v %q", isErr, text)
	}
	entries, _ := os.ReadDir(ws)
	if len(entries) != 0 {
		t.Errorf("refused writes left files: %v", entries)
	}

	// Valid text, surrogate pairs and U+FFFD itself included, is written as sent.
	if isErr, text, _ := srv.call("write_file", `{"path":"ok.txt","content":"\ud83d\ude00 \ufffd é"}`); isErr {
		t.Fatalf("valid text refused: %s", text)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "ok.txt")); string(b) != "😀 \uFFFD é" {
		t.Errorf("ok.txt holds %q", b)
	}

	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	b64 := base64.StdEncoding.EncodeToString(all)
	isErr, text, out := srv.call("write_file", fmt.Sprintf(`{"path":"bin/all.dat","content":%q,"encoding":"base64"}`, b64))
	if isErr || out["bytes"] != 256.0 {
		t.Fatalf("base64 write: %v %q %v", isErr, text, out)
	}
	if isErr, text, _ := srv.call("write_file", fmt.Sprintf(`{"path":"bin/all.dat","content":%q,"encoding":"base64","append":true}`, b64)); isErr {
		t.Fatalf("base64 append: %s", text)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "bin/all.dat")); err != nil || !bytes.Equal(b, append(all, all...)) {
		t.Errorf("bin/all.dat holds %q (%v), want bytes 0x00..0xff twice", b, err)
	}
	isErr, text, out = srv.call("read_file", `{"path":"bin/all.dat","encoding":"base64","offset":257,"limit":256}`)
	if isErr || out["content"] != b64 || out["encoding"] != "base64" || out["total_bytes"] != 512.0 || out["truncated"] != false {
		t.Errorf("base64 read: %v %q %v", isErr, text, out)
	}
	isErr, text, _ = srv.call("write_file", `{"path":"y","content":"not base64!","encoding":"base64"}`)
	if !isErr || !strings.Contains(text, "not valid base64") {
		t.Errorf("bad base64: %v %q", isErr, text)
	}
	isErr, text, _ = srv.call("write_file", `{"path":"y","content":"x","encoding":"latin1"}`)
	if !isErr || !strings.Contains(text, `encoding must be "utf-8" or "base64"`) {
		t.Errorf("unknown encoding: %v %q", isErr, text)
	}
}

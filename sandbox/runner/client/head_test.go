package client

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// The head written by hand is the one json.Marshal makes, for every op
// warren has and for arguments that need escaping; an op that would need
// escaping itself is encoded by json.Marshal and still decodes to itself.
func TestRequestHeadIsWhatJSONMakes(t *testing.T) {
	args := []any{
		proto.FileReadArgs{Path: "a/<b>&\"c\"\u2028.txt", Limit: 10 << 20},
		proto.PingArgs{},
		map[string]any{"x": []int{1, 2}, "y": nil},
		nil,
	}
	ops := []string{proto.OpFileRead, proto.OpPing, proto.OpFileWrite, "shell.exec", "a_b.C9"}
	for _, op := range ops {
		for _, a := range args {
			got, err := requestHead(op, a)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(a)
			want, _ := json.Marshal(proto.Request{Op: op, Args: raw})
			if !bytes.Equal(got, want) {
				t.Errorf("op %q args %v:\n got %s\nwant %s", op, a, got, want)
			}
		}
	}
	for _, op := range []string{`a"b`, "a\\b", "<x>", "é", ""} {
		got, err := requestHead(op, proto.PingArgs{})
		if err != nil {
			t.Fatal(err)
		}
		var req proto.Request
		if err := json.Unmarshal(got, &req); err != nil || req.Op != op {
			t.Errorf("op %q: head %s decodes to %q (%v)", op, got, req.Op, err)
		}
	}
}

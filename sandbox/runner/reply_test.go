package runner

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// The reply's head written by hand is the one json.Marshal makes.
func TestReplyHeadIsWhatJSONMakes(t *testing.T) {
	res, _ := json.Marshal(proto.FileReadResult{Jail: "/workspace/<a>&\"b\"\u2028", Size: 4096})
	for _, r := range []proto.Reply{
		{Result: res},
		{Result: json.RawMessage(`{"pid":2}`)},
		{},
		{Error: &proto.Error{Code: proto.CodeInvalid, Message: "<bad> & \"worse\""}},
	} {
		want, _ := json.Marshal(r)
		if got := replyHead(r); !bytes.Equal(got, want) {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

package main

import (
	"encoding/base64"
	"strings"
	"testing"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// TestChatShowsWorkspaceImagesToModelsThatTakeThem: the agent writes a
// PNG and reads it with read_file. Against a model that 'chat doctor'
// found takes images, the next request carries it as an image_url part
// (a data: URL of the very bytes) in a user message after the tool
// result; against one without vision, no request carries an image and the
// tool result tells the model so.
func TestChatShowsWorkspaceImagesToModelsThatTakeThem(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	pngBytes := chart(t, "png")
	b64 := base64.StdEncoding.EncodeToString(pngBytes)
	script := func() []pt.Reply {
		return []pt.Reply{
			{Calls: []pt.Call{{Name: "write_file", Args: `{"path":"chart.png","encoding":"base64","content":"` + b64 + `"}`}}},
			{Calls: []pt.Call{{Name: "read_file", Args: `{"path":"chart.png"}`}}},
			{Text: "A blue gradient."},
		}
	}
	for _, vision := range []bool{true, false} {
		model := pt.New(pt.OpenAI, script()...)
		model.NoImages = !vision
		out, _, code := chatRun(t, data, model, "doctor")
		want := map[bool]string{true: "images:                 yes", false: "images:                 no"}[vision]
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("vision %v: doctor exit %d, output lacks %q:\n%s", vision, code, want, out)
		}
		stdout, stderr, code := chatRun(t, data, model, "-p", "draw and look", "--approval", "auto")
		if code != 0 || stdout != "A blue gradient.\n" {
			t.Fatalf("vision %v: exit %d %q\n%s", vision, code, stdout, stderr)
		}
		reqs := model.Requests()
		if len(reqs) != 3 {
			t.Fatalf("vision %v: %d requests", vision, len(reqs))
		}
		msgs := reqs[2].Messages
		switch {
		case vision:
			if len(reqs[2].Images) != 1 || reqs[2].Images[0] != "data:image/png;base64,"+b64 {
				t.Errorf("vision: the request after read_file carries images %d, want the PNG as a data URL", len(reqs[2].Images))
			}
			if len(msgs) < 2 || msgs[len(msgs)-1]["role"] != "user" || msgs[len(msgs)-2]["role"] != "tool" {
				t.Errorf("vision: the picture must follow the tool result as a user message")
			}
		default:
			for i, r := range reqs {
				if len(r.Images) > 0 {
					t.Errorf("no vision: request %d carries an image", i)
				}
			}
			if last, _ := msgs[len(msgs)-1]["content"].(string); msgs[len(msgs)-1]["role"] != "tool" || !strings.Contains(last, "image is not shown") {
				t.Errorf("no vision: the tool result should say the image was not shown: %v", msgs[len(msgs)-1])
			}
		}
		model.Close()
	}
}

package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// chart draws a small picture and encodes it as PNG or JPEG.
func chart(t *testing.T, format string) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		for y := range 30 {
			img.Set(x, y, color.RGBA{uint8(x * 6), uint8(y * 8), 200, 255})
		}
	}
	var b bytes.Buffer
	var err error
	if format == "png" {
		err = png.Encode(&b, img)
	} else {
		err = jpeg.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// printfBytes is a shell printf command that writes b to path.
func printfBytes(b []byte, path string) string {
	var s strings.Builder
	s.WriteString("printf '")
	for _, c := range b {
		fmt.Fprintf(&s, "\\%03o", c)
	}
	s.WriteString("' > " + path)
	return s.String()
}

func imageOf(res *sdk.CallToolResult) *sdk.ImageContent {
	for _, c := range res.Content {
		if ic, ok := c.(*sdk.ImageContent); ok {
			return ic
		}
	}
	return nil
}

// TestReadFileReturnsImagesToMultimodalClients: an image made in the jail
// reaches an MCP client as image content with its type read from the
// bytes (a JPEG named .txt is a JPEG), byte for byte; encoding base64
// still returns the bytes as text; an image over the cap is refused with
// what to do.
func TestReadFileReturnsImagesToMultimodalClients(t *testing.T) {
	needJail(t)
	c := serveStdio(t, "--data-dir", jailDir(t))
	pngBytes, jpgBytes := chart(t, "png"), chart(t, "jpeg")
	c.exec(printfBytes(pngBytes, "chart.png") + " && " + printfBytes(jpgBytes, "photo.txt"))

	for _, f := range []struct {
		path, mime string
		want       []byte
	}{{"chart.png", "image/png", pngBytes}, {"photo.txt", "image/jpeg", jpgBytes}} {
		res := c.call("read_file", map[string]any{"path": f.path})
		if res.IsError {
			t.Fatalf("read_file %s: %s", f.path, textOf(res))
		}
		ic := imageOf(res)
		if ic == nil || ic.MIMEType != f.mime || !bytes.Equal(ic.Data, f.want) {
			t.Fatalf("read_file %s: image content %v, want %s of %d bytes", f.path, ic != nil, f.mime, len(f.want))
		}
		out := structured(t, res)
		if out["mime_type"] != f.mime || out["encoding"] != "image" || out["total_bytes"] != float64(len(f.want)) {
			t.Errorf("read_file %s: structured %v", f.path, out)
		}
		if !strings.Contains(textOf(res), "40×30") {
			t.Errorf("read_file %s: text %q should give the size in pixels", f.path, textOf(res))
		}
	}
	// Asked for bytes, an image is bytes.
	out := c.ok("read_file", map[string]any{"path": "chart.png", "encoding": "base64"})
	if out["encoding"] != "base64" || out["content"] == "" {
		t.Errorf("encoding base64 of an image: %v", out)
	}
	// A PNG header on 6 MB of noise: over the image cap, refused with the way out.
	c.exec(printfBytes(pngBytes[:33], "big.png") + " && head -c 6000000 /dev/urandom >> big.png")
	c.fails("read_file", map[string]any{"path": "big.png"}, "over read_file's image limit")
	// A name that says image on bytes that are not: text stays text.
	c.exec("echo not a picture > fake.png")
	if out := c.ok("read_file", map[string]any{"path": "fake.png"}); out["content"] != "not a picture\n" {
		t.Errorf("fake.png: %v", out)
	}
}

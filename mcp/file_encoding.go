package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // DecodeConfig of GIF headers
	_ "image/jpeg"
	_ "image/png"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// Encodings of file content in write_file and read_file.
const (
	encodingText   = "utf-8"
	encodingBase64 = "base64"
	encodingImage  = "image" // read_file's output only: the bytes are the result's image content
)

// maxImageBytes bounds an image read_file returns as image content (base64
// makes it a third bigger on the wire): 5 MiB, what multimodal model APIs
// take per image. Bigger images are refused with what to do instead.
const maxImageBytes = 5 << 20

// imageInfo is an image recognised by its bytes.
type imageInfo struct {
	mime          string
	width, height int // 0 when not read (WebP)
}

// sniffImage recognises a PNG, JPEG, GIF or WebP by its bytes, never by
// its name, and checks that its header decodes (the pixels are not
// decoded: the jail controls the file). ok is false for anything else;
// err says why a file that starts like an image is not one.
func sniffImage(data []byte) (info imageInfo, ok bool, err error) {
	mime := http.DetectContentType(data)
	switch mime {
	case "image/png", "image/jpeg", "image/gif":
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return imageInfo{}, false, fmt.Errorf("it starts like %s but its header does not decode (%v)", mime, err)
		}
		return imageInfo{mime: mime, width: cfg.Width, height: cfg.Height}, true, nil
	case "image/webp":
		// RIFF size: the bytes after the first 8, which must all be there.
		if n := binary.LittleEndian.Uint32(data[4:8]); int64(n)+8 > int64(len(data)) || n < 12 {
			return imageInfo{}, false, fmt.Errorf("it starts like image/webp but its RIFF size (%d) does not match the file", n)
		}
		return imageInfo{mime: mime}, true, nil
	}
	return imageInfo{}, false, nil
}

// invalidTextArgument returns the name of a string argument of req that is
// not valid UTF-8 as the client sent it, or "" when all are.
//
// JSON text cannot carry other bytes as they are: a client that has some
// either sends them raw (not JSON any more) or, as JavaScript and Python's
// surrogateescape do, as an escaped lone surrogate such as \udcff. Go's
// JSON decoder turns both into U+FFFD without a word, so the arguments
// bound into a tool's input cannot tell a replaced byte from a real U+FFFD.
// mcp-go keeps the arguments' JSON text as it arrived (RawArguments), and
// that is what is checked here. A caller in the same process passes Go
// strings instead, which are checked as they are.
func invalidTextArgument(req mcp.CallToolRequest) string {
	raw := req.Params.RawArguments
	if len(raw) == 0 {
		args := req.GetArguments()
		for _, k := range sortedKeys(args) {
			if s, ok := args[k].(string); ok && !utf8.ValidString(s) {
				return k
			}
		}
		return ""
	}
	if jsonTextValid(raw) {
		return ""
	}
	var fields map[string]json.RawMessage // values verbatim
	if json.Unmarshal(raw, &fields) != nil {
		return "arguments"
	}
	for _, k := range sortedKeys(fields) {
		if !jsonTextValid(fields[k]) {
			return k
		}
	}
	return "arguments" // a key itself
}

// jsonTextValid reports whether the strings of the JSON text b decode to
// valid UTF-8: b is UTF-8 and every \u escape of a surrogate is half of a
// pair. b has been parsed already, so a backslash is always inside a string.
func jsonTextValid(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] != 'u' {
			i++ // \\, \" and the like: the next byte is not an escape
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			return false
		}
		i += 5
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return false
		case r >= 0xd800 && r <= 0xdbff:
			if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if r2, ok := hex4(b, i+3); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
					i += 6
					continue
				}
			}
			return false
		}
	}
	return true
}

// hex4 decodes the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// notUTF8 is the error for an argument that is not valid UTF-8.
func notUTF8(arg string) error {
	if arg == "content" {
		return errorf(`content is not valid UTF-8: send binary data with encoding "base64"`)
	}
	return errorf(`%s is not valid UTF-8 (raw bytes, or a lone surrogate such as \udcff, which would become U+FFFD): send it as UTF-8 text; write binary files with write_file and encoding "base64"`, arg)
}

// decodeContent returns the bytes write_file's content stands for.
func decodeContent(content, encoding string) ([]byte, error) {
	switch encoding {
	case "", encodingText:
		return []byte(content), nil
	case encodingBase64:
		b, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, errorf("content is not valid base64 (%v): encode the bytes in standard base64 (RFC 4648, with padding)", err)
		}
		return b, nil
	}
	return nil, errorf(`encoding must be "utf-8" or "base64", not %q`, encoding)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

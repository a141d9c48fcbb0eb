package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/sessions"
)

// ReadFileInput is the input of read_file.
type ReadFileInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session whose workspace to read; omitted: your default session"`
	Path      string `json:"path" jsonschema:"a path relative to the workspace, or absolute under /workspace"`
	Offset    int    `json:"offset,omitempty" jsonschema:"first line to return, 1-based (default 1); with encoding base64, first byte"`
	Limit     int    `json:"limit,omitempty" jsonschema:"maximum number of lines to return (default 2000); with encoding base64, of bytes (default and at most 196608)"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf-8 (default): the file is text, returned by lines; base64: its bytes, returned in standard base64, for binary files"`
}

// ReadFileOutput is the output of read_file.
type ReadFileOutput struct {
	Path       string `json:"path" jsonschema:"the path as seen in the jail"`
	Content    string `json:"content" jsonschema:"the requested lines, or bytes in base64; empty for an image, whose bytes are the result's image content"`
	Encoding   string `json:"encoding" jsonschema:"the encoding of content: utf-8, base64, or image (the file is an image returned as MCP image content)"`
	MimeType   string `json:"mime_type,omitempty" jsonschema:"with encoding image: image/png, image/jpeg, image/gif or image/webp, read from the bytes"`
	TotalLines int    `json:"total_lines" jsonschema:"lines in the whole file (0 with encoding base64)"`
	TotalBytes int    `json:"total_bytes" jsonschema:"bytes in the whole file"`
	Truncated  bool   `json:"truncated" jsonschema:"more lines or bytes follow: read on with a larger offset"`
}

// WriteFileInput is the input of write_file.
type WriteFileInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session whose workspace to write; omitted: your default session"`
	Path      string `json:"path" jsonschema:"a path relative to the workspace, or absolute under /workspace; parent directories are created"`
	Content   string `json:"content" jsonschema:"the text to write, valid UTF-8; with encoding base64, the bytes in standard base64"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf-8 (default): content is text; base64: content is the file's bytes in standard base64, for binary files"`
	Append    bool   `json:"append,omitempty" jsonschema:"append to the file instead of replacing it"`
}

// WriteFileOutput is the output of write_file.
type WriteFileOutput struct {
	Path  string `json:"path" jsonschema:"the path as seen in the jail"`
	Bytes int    `json:"bytes" jsonschema:"bytes written by this call"`
}

// EditFileInput is the input of edit_file.
type EditFileInput struct {
	SessionID  string `json:"session_id,omitempty" jsonschema:"the session whose workspace to edit; omitted: your default session"`
	Path       string `json:"path" jsonschema:"a path relative to the workspace, or absolute under /workspace"`
	OldText    string `json:"old_text" jsonschema:"the exact text to replace; must occur once unless replace_all"`
	NewText    string `json:"new_text" jsonschema:"the replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence"`
}

// EditFileOutput is the output of edit_file.
type EditFileOutput struct {
	Path         string `json:"path" jsonschema:"the path as seen in the jail"`
	Replacements int    `json:"replacements" jsonschema:"occurrences replaced"`
}

// openFiles opens the files of the caller's session, for writing or only
// reading: what every file tool starts with.
func (d *deps) openFiles(ctx context.Context, sessionID string, write bool) (sessions.Files, error) {
	user, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	_, files, err := d.sessions.OpenFiles(ctx, user, sessionID, write)
	return files, err
}

// Caps of the file tools.
const (
	maxReadBytes  = 10 << 20  // files bigger than this are refused by read_file
	maxReadOut    = 256 << 10 // content returned by one read_file call
	defaultLimit  = 2000
	maxWriteBytes = 10 << 20
	maxReadBinary = maxReadOut / 4 * 3 // bytes whose base64 is maxReadOut
)

func readFile(d *deps) Tool {
	t := mcp.NewTool("read_file",
		mcp.WithDescription("Read a text file of the workspace, by lines; or, with encoding base64, the bytes of any file. "+
			"Binary files are refused as text. An image (PNG, JPEG, GIF or WebP, recognised by its bytes, not its name) "+
			"of at most 5 MiB is returned as image content that multimodal clients can see, unless encoding base64 asks for its bytes."),
		mcp.WithInputSchema[ReadFileInput](),
		mcp.WithOutputSchema[ReadFileOutput](),
		annotations("Read a file", true, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in ReadFileInput) (result[ReadFileOutput], error) {
		var zero result[ReadFileOutput]
		if k := invalidTextArgument(req); k != "" {
			return zero, notUTF8(k)
		}
		if in.Offset < 0 || in.Limit < 0 {
			return zero, errorf("offset and limit must be positive counts")
		}
		// 0 and "not given" decode alike; a client that sends offset 0
		// (0-based habits) is told rather than silently given line 1.
		for _, k := range []string{"offset", "limit"} {
			if v, ok := req.GetArguments()[k].(float64); ok && v == 0 {
				return zero, errorf("%s is 1-based: the first line (or byte, with encoding base64) is 1; omit %s for the default", k, k)
			}
		}
		if in.Encoding != "" && in.Encoding != encodingText && in.Encoding != encodingBase64 {
			return zero, errorf(`encoding must be "utf-8" or "base64", not %q`, in.Encoding)
		}
		files, err := d.openFiles(ctx, in.SessionID, false)
		if err != nil {
			return zero, err
		}
		f, err := files.Read(ctx, in.Path, maxReadBytes)
		if err != nil {
			return zero, fileError("read_file", err)
		}
		data, jail := f.Data, f.Jail
		if in.Encoding == encodingBase64 {
			out := sliceBytes(data, in.Offset, in.Limit)
			out.Path = jail
			return result[ReadFileOutput]{Out: out, Text: out.Content}, nil
		}
		info, isImage, imgErr := sniffImage(data)
		if isImage {
			if len(data) > maxImageBytes {
				return zero, errorf("%s is an %s image of %d bytes, over read_file's image limit of %d bytes (5 MiB): make a smaller "+
					"copy with shell_exec (fewer pixels, or JPEG instead of PNG) and read that, or read its bytes with encoding \"base64\"",
					in.Path, info.mime, len(data), maxImageBytes)
			}
			out := ReadFileOutput{Path: jail, Encoding: encodingImage, MimeType: info.mime, TotalBytes: len(data)}
			text := fmt.Sprintf("%s: %s image, %d bytes", jail, info.mime, len(data))
			if info.width > 0 {
				text = fmt.Sprintf("%s: %s image, %d×%d pixels, %d bytes", jail, info.mime, info.width, info.height, len(data))
			}
			img := mcp.NewImageContent(base64.StdEncoding.EncodeToString(data), info.mime)
			return result[ReadFileOutput]{Out: out, Text: text, Extra: []mcp.Content{img}}, nil
		}
		if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
			if imgErr != nil {
				return zero, errorf("%s is a binary file, not an image read_file can return: %v; read its bytes with encoding \"base64\", "+
					"or inspect it with shell_exec, e.g. 'file %s'", in.Path, imgErr, jail)
			}
			return zero, errorf("%s is a binary file (not UTF-8 text): read its bytes with encoding \"base64\", or inspect it with shell_exec, e.g. 'file %s' or 'xxd %s | head'", in.Path, jail, jail)
		}
		out := sliceLines(string(data), in.Offset, in.Limit)
		out.Path, out.Encoding, out.TotalBytes = jail, encodingText, len(data)
		return result[ReadFileOutput]{Out: out, Text: out.Content}, nil
	})
	return Tool{Toolset: "files", Tool: t, Handler: h}
}

// sliceLines returns lines offset.. (1-based) of s, at most limit of them and
// at most maxReadOut bytes. It walks s by offsets, never splitting it into a
// string per line: a whole small file, the usual read, is s itself.
func sliceLines(s string, offset, limit int) ReadFileOutput {
	if offset <= 0 {
		offset = 1
	}
	if limit <= 0 {
		limit = defaultLimit
	}
	total := strings.Count(s, "\n")
	if s != "" && s[len(s)-1] != '\n' {
		total++
	}
	out := ReadFileOutput{TotalLines: total}
	if offset > total {
		return out
	}
	start := 0
	for range offset - 1 {
		start += strings.IndexByte(s[start:], '\n') + 1
	}
	end, line := start, offset-1 // line: the 0-based index of the next line
	for line < total && line-(offset-1) < limit {
		next := len(s)
		if i := strings.IndexByte(s[end:], '\n'); i >= 0 {
			next = end + i + 1
		}
		if next-start > maxReadOut && end > start {
			break
		}
		end, line = next, line+1
	}
	out.Content = s[start:end]
	if len(out.Content) < len(s)/2 {
		// A part of a large file: the result (which the usage meter may
		// hold a while) keeps only that part.
		out.Content = strings.Clone(out.Content)
	}
	out.Truncated = line < total
	return out
}

// sliceBytes returns bytes offset.. (1-based) of data in base64, at most
// limit of them and at most maxReadBinary.
func sliceBytes(data []byte, offset, limit int) ReadFileOutput {
	offset = max(offset, 1)
	if limit <= 0 || limit > maxReadBinary {
		limit = maxReadBinary
	}
	out := ReadFileOutput{Encoding: encodingBase64, TotalBytes: len(data)}
	if offset > len(data) {
		return out
	}
	end := min(len(data), offset-1+limit)
	out.Content = base64.StdEncoding.EncodeToString(data[offset-1 : end])
	out.Truncated = end < len(data)
	return out
}

func writeFile(d *deps) Tool {
	t := mcp.NewTool("write_file",
		mcp.WithDescription("Write a file in the workspace atomically (temporary file, then rename), creating "+
			"parent directories; or append to it. Content is UTF-8 text, or any bytes with encoding base64. "+
			"A symbolic link is followed while it stays in the workspace."),
		mcp.WithInputSchema[WriteFileInput](),
		mcp.WithOutputSchema[WriteFileOutput](),
		annotations("Write a file", false, true, false, false),
	)
	h := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in WriteFileInput) (result[WriteFileOutput], error) {
		var zero result[WriteFileOutput]
		if k := invalidTextArgument(req); k != "" {
			return zero, notUTF8(k)
		}
		content, err := decodeContent(in.Content, in.Encoding)
		if err != nil {
			return zero, err
		}
		if len(content) > maxWriteBytes {
			return zero, errorf("content is %d bytes, over write_file's limit of %d: write it in parts with append", len(content), maxWriteBytes)
		}
		files, err := d.openFiles(ctx, in.SessionID, true)
		if err != nil {
			return zero, err
		}
		w, err := files.Write(ctx, in.Path, content, sessions.WriteOptions{Append: in.Append, Limit: maxReadBytes})
		if err != nil {
			tool := "write_file"
			if in.Append {
				tool = "write_file with append"
			}
			return zero, fileError(tool, err)
		}
		out := WriteFileOutput{Path: w.Jail, Bytes: len(content)}
		return result[WriteFileOutput]{Out: out, Text: fmt.Sprintf("wrote %d bytes to %s", out.Bytes, out.Path)}, nil
	})
	return Tool{Toolset: "files", Tool: t, Handler: h}
}

func editFile(d *deps) Tool {
	t := mcp.NewTool("edit_file",
		mcp.WithDescription("Replace exact text in a workspace file. old_text must occur exactly once, unless "+
			"replace_all is set. The file is rewritten atomically."),
		mcp.WithInputSchema[EditFileInput](),
		mcp.WithOutputSchema[EditFileOutput](),
		annotations("Edit a file", false, true, false, false),
	)
	h := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in EditFileInput) (result[EditFileOutput], error) {
		var zero result[EditFileOutput]
		if k := invalidTextArgument(req); k != "" {
			return zero, notUTF8(k)
		}
		if in.OldText == "" {
			return zero, errorf("old_text is empty: pass the exact text to replace (use write_file to create a file)")
		}
		files, err := d.openFiles(ctx, in.SessionID, true)
		if err != nil {
			return zero, err
		}
		e, err := files.Edit(ctx, in.Path, sessions.EditOptions{Old: in.OldText, New: in.NewText, All: in.ReplaceAll, Limit: maxReadBytes})
		if err != nil {
			return zero, fileError("edit_file", err)
		}
		switch n := e.Found; {
		case n == 0:
			return zero, errorf("old_text was not found in %s: read the file with read_file and copy the text exactly, whitespace included", in.Path)
		case n > 1 && !in.ReplaceAll:
			return zero, errorf("old_text occurs %d times in %s: include more surrounding text to make it unique, or set replace_all", n, in.Path)
		}
		out := EditFileOutput{Path: e.Jail, Replacements: e.Replaced}
		return result[EditFileOutput]{Out: out, Text: fmt.Sprintf("replaced %d occurrence(s) in %s", out.Replacements, out.Path)}, nil
	})
	return Tool{Toolset: "files", Tool: t, Handler: h}
}

package mcp

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// ReadFileInput is the input of read_file.
type ReadFileInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session whose workspace to read; omitted: your default session"`
	Path      string `json:"path" jsonschema:"a path relative to the workspace, or absolute under /workspace"`
	Offset    int    `json:"offset,omitempty" jsonschema:"first line to return, 1-based (default 1)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"maximum number of lines to return (default 2000)"`
}

// ReadFileOutput is the output of read_file.
type ReadFileOutput struct {
	Path       string `json:"path" jsonschema:"the path as seen in the jail"`
	Content    string `json:"content" jsonschema:"the requested lines"`
	TotalLines int    `json:"total_lines" jsonschema:"lines in the whole file"`
	Truncated  bool   `json:"truncated" jsonschema:"more lines follow: read on with a larger offset"`
}

// WriteFileInput is the input of write_file.
type WriteFileInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session whose workspace to write; omitted: your default session"`
	Path      string `json:"path" jsonschema:"a path relative to the workspace, or absolute under /workspace; parent directories are created"`
	Content   string `json:"content" jsonschema:"the text to write"`
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

// Caps of the file tools.
const (
	maxReadBytes  = 10 << 20  // files bigger than this are refused by read_file
	maxReadOut    = 256 << 10 // content returned by one read_file call
	defaultLimit  = 2000
	maxWriteBytes = 10 << 20
)

func readFile(d *deps) Tool {
	t := mcp.NewTool("read_file",
		mcp.WithDescription("Read a text file of the workspace, by lines. Binary files are refused."),
		mcp.WithInputSchema[ReadFileInput](),
		mcp.WithOutputSchema[ReadFileOutput](),
		annotations("Read a file", true, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in ReadFileInput) (result[ReadFileOutput], error) {
		var zero result[ReadFileOutput]
		if in.Offset < 0 || in.Limit < 0 {
			return zero, errorf("offset and limit must be positive line counts")
		}
		ws, rel, err := d.openPath(ctx, in.SessionID, in.Path, false)
		if err != nil {
			return zero, err
		}
		defer ws.close()
		data, err := ws.readFile(rel, in.Path, "read_file")
		if err != nil {
			return zero, err
		}
		if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
			return zero, errorf("%s is a binary file (not UTF-8 text): inspect it with shell_exec, e.g. 'file %s' or 'xxd %s | head'", in.Path, jailPath(rel), jailPath(rel))
		}
		out := sliceLines(string(data), in.Offset, in.Limit)
		out.Path = jailPath(rel)
		return result[ReadFileOutput]{Out: out, Text: out.Content}, nil
	})
	return Tool{Toolset: "files", Tool: t, Handler: h}
}

// sliceLines returns lines offset.. (1-based) of s, at most limit of them and
// at most maxReadOut bytes.
func sliceLines(s string, offset, limit int) ReadFileOutput {
	if offset <= 0 {
		offset = 1
	}
	if limit <= 0 {
		limit = defaultLimit
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	out := ReadFileOutput{TotalLines: len(lines)}
	if offset > len(lines) {
		return out
	}
	var b strings.Builder
	end := min(len(lines), offset-1+limit)
	for i := offset - 1; i < end; i++ {
		if b.Len()+len(lines[i]) > maxReadOut && b.Len() > 0 {
			end = i
			break
		}
		b.WriteString(lines[i])
	}
	out.Content = b.String()
	out.Truncated = end < len(lines)
	return out
}

func writeFile(d *deps) Tool {
	t := mcp.NewTool("write_file",
		mcp.WithDescription("Write a text file in the workspace atomically (temporary file, then rename), creating "+
			"parent directories; or append to it."),
		mcp.WithInputSchema[WriteFileInput](),
		mcp.WithOutputSchema[WriteFileOutput](),
		annotations("Write a file", false, true, false, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in WriteFileInput) (result[WriteFileOutput], error) {
		var zero result[WriteFileOutput]
		if len(in.Content) > maxWriteBytes {
			return zero, errorf("content is %d bytes, over write_file's limit of %d: write it in parts with append", len(in.Content), maxWriteBytes)
		}
		ws, rel, err := d.openPath(ctx, in.SessionID, in.Path, true)
		if err != nil {
			return zero, err
		}
		defer ws.close()
		data := []byte(in.Content)
		if in.Append {
			old, err := ws.readFile(rel, in.Path, "write_file with append")
			if err != nil && !isNotExist(err) {
				return zero, err
			}
			data = append(old, data...)
		}
		if err := d.checkGrowth(ws, rel, len(data)); err != nil {
			return zero, err
		}
		if err := ws.writeAtomic(rel, data); err != nil {
			return zero, fileError(in.Path, err)
		}
		out := WriteFileOutput{Path: jailPath(rel), Bytes: len(in.Content)}
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
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in EditFileInput) (result[EditFileOutput], error) {
		var zero result[EditFileOutput]
		if in.OldText == "" {
			return zero, errorf("old_text is empty: pass the exact text to replace (use write_file to create a file)")
		}
		ws, rel, err := d.openPath(ctx, in.SessionID, in.Path, true)
		if err != nil {
			return zero, err
		}
		defer ws.close()
		data, err := ws.readFile(rel, in.Path, "edit_file")
		if err != nil {
			return zero, err
		}
		s := string(data)
		n := strings.Count(s, in.OldText)
		switch {
		case n == 0:
			return zero, errorf("old_text was not found in %s: read the file with read_file and copy the text exactly, whitespace included", in.Path)
		case n > 1 && !in.ReplaceAll:
			return zero, errorf("old_text occurs %d times in %s: include more surrounding text to make it unique, or set replace_all", n, in.Path)
		}
		if !in.ReplaceAll {
			n = 1
		}
		s = strings.Replace(s, in.OldText, in.NewText, n)
		if err := d.checkGrowth(ws, rel, len(s)); err != nil {
			return zero, err
		}
		if err := ws.writeAtomic(rel, []byte(s)); err != nil {
			return zero, fileError(in.Path, err)
		}
		out := EditFileOutput{Path: jailPath(rel), Replacements: n}
		return result[EditFileOutput]{Out: out, Text: fmt.Sprintf("replaced %d occurrence(s) in %s", n, out.Path)}, nil
	})
	return Tool{Toolset: "files", Tool: t, Handler: h}
}

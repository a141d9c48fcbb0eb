package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// historyLimit is how many prompts the REPL keeps.
const historyLimit = 1000

// historyFile keeps the REPL's prompts in the data directory, mode 0600:
// prompts can hold anything a person typed. warren writes it itself
// rather than through readline's HistoryFile, which creates files 0666
// (less the umask) and rewrites them through a temporary file of that mode.
type historyFile struct {
	f *os.File
}

// openHistory reads the last prompts (at most historyLimit) and opens the
// file for appending. A file over the limit is rewritten first, 0600.
func openHistory(dataDir string) (*historyFile, []string, error) {
	path := filepath.Join(dataDir, "chat_history")
	var lines []string
	if f, err := os.Open(path); err == nil {
		// Bounded: the newest 1 MB is plenty for historyLimit prompts.
		if st, err := f.Stat(); err == nil && st.Size() > 1<<20 {
			f.Seek(st.Size()-1<<20, io.SeekStart) //nolint:errcheck // a failed seek reads from the start, still bounded below
		}
		b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
		f.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) > historyLimit {
			lines = lines[len(lines)-historyLimit:]
			if err := rewriteHistory(path, lines); err != nil {
				return nil, nil, err
			}
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open chat history: %w", err)
	}
	// An older file may have another mode: fix it on the descriptor.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("open chat history: %w", err)
	}
	return &historyFile{f: f}, lines, nil
}

func rewriteHistory(path string, lines []string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".chat_history-*") // CreateTemp makes 0600 files
	if err != nil {
		return fmt.Errorf("rewrite chat history: %w", err)
	}
	defer os.Remove(tmp.Name())
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("rewrite chat history: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("rewrite chat history: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rewrite chat history: %w", err)
	}
	return nil
}

// add appends one prompt (one line: readline lines have no newline).
func (h *historyFile) add(line string) {
	if h == nil {
		return
	}
	h.f.WriteString(strings.ReplaceAll(line, "\n", " ") + "\n") //nolint:errcheck // history is a convenience
}

func (h *historyFile) close() {
	if h != nil {
		h.f.Close()
	}
}

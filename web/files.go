package web

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
)

// dist is the console as built by 'just web-build'.
//
//go:embed dist
var dist embed.FS

// osDir serves a development build from disk.
func osDir(dir string) fs.FS { return os.DirFS(dir) }

// file is one asset, with its gzip encoding made once.
type file struct {
	body, gz []byte
	ctype    string
}

// files serves the console's assets. Built assets are small and few: they
// are read and compressed once, at start (or on every request in
// development, to pick up a rebuild).
type files struct {
	src  fs.FS
	live bool

	// mu protects byPath.
	mu     sync.Mutex
	byPath map[string]*file
}

func newFiles(src fs.FS, live bool) (*files, error) {
	f := &files{src: src, live: live, byPath: map[string]*file{}}
	if _, err := fs.Stat(src, "index.html"); err != nil {
		return nil, fmt.Errorf("console assets: no index.html: run 'just web-build': %w", err)
	}
	return f, nil
}

func (f *files) load(name string) (*file, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.byPath[name]; ok && !f.live {
		return c, nil
	}
	st, err := fs.Stat(f.src, name)
	if err != nil || !st.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	body, err := fs.ReadFile(f.src, name)
	if err != nil {
		return nil, err
	}
	c := &file{body: body, ctype: mime.TypeByExtension(path.Ext(name))}
	if c.ctype == "" {
		c.ctype = "application/octet-stream"
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(body)
	_ = zw.Close()
	if b.Len() < len(body) {
		c.gz = b.Bytes()
	}
	f.byPath[name] = c
	return c, nil
}

// serve answers GET and HEAD for an asset; / is index.html. Names under
// assets/ carry a hash of their content and are cached for good.
func (f *files) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	c, err := f.load(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", c.ctype)
	if strings.HasPrefix(name, "assets/") && !f.live {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Add("Vary", "Accept-Encoding")
	body := c.body
	if c.gz != nil && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		body = c.gz
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

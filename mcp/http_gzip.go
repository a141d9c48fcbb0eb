package mcp

import (
	"compress/gzip"
	"context"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// gzipJSON compresses the JSON answers of /mcp for clients that accept
// gzip (Accept-Encoding): tools/list is some 45 KB of JSON and about 8 KB
// gzipped, and file contents and long outputs compress as well. Only
// complete JSON answers are compressed, and only from gzipMinBytes on: an
// SSE stream (progress, then the result) is sent as it is, so that each
// event reaches the client when it is flushed, and errors and 202s carry
// no JSON body to compress.
//
// The writer also counts its flushes for notify (notify.go): see
// flushWatch.
func gzipJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		gw := &gzipWriter{ResponseWriter: w, plain: !acceptsGzip(r.Header.Values("Accept-Encoding")), flushes: newFlushWatch()}
		defer gw.close()
		next.ServeHTTP(gw, r.WithContext(context.WithValue(r.Context(), flushWatchKey{}, gw.flushes)))
	})
}

// gzipMinBytes: below this, an answer is sent plain (gzip's header and
// trailer alone are 18 bytes, and small answers are most answers).
const gzipMinBytes = 1024

// gzipPool keeps compressors between answers: each holds some 800 KB.
// BestSpeed: tools/list (44.6 KB) goes out as 9.6 KB, against 7.4 KB at
// the default level, and compressing it took 2.0 ms against 4.8 ms (on a
// loaded 2-core machine): the server pays for every answer, the client
// would save little more.
var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// gzipWriter decides at the first write: a JSON answer whose first write
// (mcp-go encodes each answer in one) is large enough is compressed; any
// other answer passes through untouched.
type gzipWriter struct {
	http.ResponseWriter
	plain   bool // the client does not accept gzip
	flushes *flushWatch
	status  int // held until the first write decides
	decided bool
	zw      *gzip.Writer // nil: plain
}

func (g *gzipWriter) WriteHeader(status int) {
	if g.decided || g.status != 0 {
		g.ResponseWriter.WriteHeader(status)
		return
	}
	g.status = status
	if status != http.StatusOK {
		g.decide(0)
	}
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if !g.decided {
		g.decide(len(p))
	}
	if g.zw != nil {
		return g.zw.Write(p)
	}
	return g.ResponseWriter.Write(p)
}

// decide compresses a 200 JSON answer of at least gzipMinBytes, and sends
// the held status.
func (g *gzipWriter) decide(firstWrite int) {
	g.decided = true
	h := g.ResponseWriter.Header()
	ct, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if !g.plain && (g.status == 0 || g.status == http.StatusOK) && ct == "application/json" &&
		h.Get("Content-Encoding") == "" && firstWrite >= gzipMinBytes {
		h.Set("Content-Encoding", "gzip")
		h.Del("Content-Length")
		g.zw = gzipPool.Get().(*gzip.Writer)
		g.zw.Reset(g.ResponseWriter)
	}
	if g.status != 0 {
		g.ResponseWriter.WriteHeader(g.status)
	}
}

// Flush sends what is written so far; an SSE stream is never compressed,
// so its events are flushed as they are.
func (g *gzipWriter) Flush() {
	if !g.decided && g.status != 0 {
		g.decide(0)
	}
	if g.zw != nil {
		_ = g.zw.Flush()
	}
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	g.flushes.done()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// close ends the compressed answer and returns the compressor, or sends a
// status held for an answer without a body.
func (g *gzipWriter) close() {
	if !g.decided {
		if g.status != 0 {
			g.decide(0)
		}
		return
	}
	if g.zw != nil {
		_ = g.zw.Close()
		g.zw.Reset(io.Discard)
		gzipPool.Put(g.zw)
		g.zw = nil
	}
}

// acceptsGzip reads Accept-Encoding (RFC 9110 12.5.3): gzip, or *, with a
// non-zero weight.
func acceptsGzip(values []string) bool {
	star := false
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "x-gzip" && name != "*" {
				continue
			}
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
						q = f
					}
				}
			}
			if name == "*" {
				star = q > 0
				continue
			}
			return q > 0
		}
	}
	return star
}

// flushWatch counts the flushes of one HTTP answer. mcp-go (v1.2.1) can
// lose a notification sent at the very end of a call on the 2026-07-28
// revision: its forwarder takes the notification off the session's
// channel, and if the call's answer is being written meanwhile, drops it
// (only requests with resumable streams, the earlier revisions, are
// drained in order). A notification sent while the call still runs is
// written and flushed by the forwarder before the answer can start; notify
// waits for that flush (at most flushWait), so that a warning sent with
// the result is not lost.
type flushWatch struct {
	mu sync.Mutex
	n  int
	ch chan struct{} // closed and replaced at each flush
}

type flushWatchKey struct{}

// flushWait bounds how long a notification waits for its flush: a stalled
// client must not hold the call.
const flushWait = 2 * time.Second

func newFlushWatch() *flushWatch { return &flushWatch{ch: make(chan struct{})} }

func (f *flushWatch) done() {
	f.mu.Lock()
	f.n++
	close(f.ch)
	f.ch = make(chan struct{})
	f.mu.Unlock()
}

func (f *flushWatch) count() (int, chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.ch
}

// afterFlush runs send, then waits until the answer of ctx's HTTP request
// has flushed once more (the notification is on the wire), at most
// flushWait. Outside an HTTP request it only runs send.
func afterFlush(ctx context.Context, send func() error) error {
	f, _ := ctx.Value(flushWatchKey{}).(*flushWatch)
	if f == nil {
		return send()
	}
	before, _ := f.count()
	if err := send(); err != nil {
		return err
	}
	timer := time.NewTimer(flushWait)
	defer timer.Stop()
	for {
		n, ch := f.count()
		if n > before {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

package mcp

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/sessions/bound"
)

// slogToZerolog is a slog.Handler that writes to zerolog, so that what
// mcp-go's HTTP transport logs (it logs through log/slog, in plain text on
// stderr by default) is one more JSON line of warren's log.
type slogToZerolog struct {
	l     zerolog.Logger
	attrs []slog.Attr
	group string
}

// zerologLevel maps slog levels. mcp-go logs routine per-request events
// (a client's GET refused because warren serves no standalone stream, an
// idle session swept) at Info: they are debug lines here.
func zerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l >= slog.LevelError:
		return zerolog.ErrorLevel
	case l >= slog.LevelWarn:
		return zerolog.WarnLevel
	default:
		return zerolog.DebugLevel
	}
}

func (h slogToZerolog) Enabled(_ context.Context, l slog.Level) bool {
	return h.l.GetLevel() <= zerologLevel(l)
}

func (h slogToZerolog) Handle(_ context.Context, r slog.Record) error {
	e := h.l.WithLevel(zerologLevel(r.Level)).Str("from", "mcp-go")
	for _, a := range h.attrs {
		e = field(e, a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		e = field(e, key, a.Value)
		return true
	})
	e.Msg(bound.String(r.Message, bound.Line))
	return nil
}

func (h slogToZerolog) WithAttrs(attrs []slog.Attr) slog.Handler {
	for _, a := range attrs {
		if h.group != "" {
			a.Key = h.group + "." + a.Key
		}
		h.attrs = append(append([]slog.Attr(nil), h.attrs...), a)
	}
	return h
}

func (h slogToZerolog) WithGroup(name string) slog.Handler {
	if h.group != "" {
		name = h.group + "." + name
	}
	h.group = name
	return h
}

// field adds one attribute; errors keep their text (zerolog would marshal
// an error value as an empty object). mcp-go logs what clients sent (a
// method, a malformed message): a field is cut to bound.Line bytes.
func field(e *zerolog.Event, key string, v slog.Value) *zerolog.Event {
	switch x := v.Resolve().Any().(type) {
	case error:
		return e.Str(key, bound.String(x.Error(), bound.Line))
	case string:
		return e.Str(key, bound.String(x, bound.Line))
	case []byte:
		return e.Str(key, bound.String(string(x), bound.Line))
	default:
		if b, err := json.Marshal(x); err == nil && len(b) > bound.Line {
			return e.Str(key, bound.String(string(b), bound.Line))
		}
		return e.Interface(key, x)
	}
}

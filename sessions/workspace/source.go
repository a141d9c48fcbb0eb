package workspace

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// Source is a parsed session source: a network URL or a path of this host.
// Parsing decides which, once: a string that looks like a URL is a URL
// (valid or refused), never a path, so that "https://../../etc" cannot
// become /etc by way of path cleaning.
type Source struct {
	// Raw is what the caller passed.
	Raw string
	// URL is a network source (https, http, ssh, git); scp-like addresses
	// (git@host:path) are read as ssh. Nil for a local source.
	URL *url.URL
	// Path is a local source, from a path or a file:// URL, as given.
	Path string
	// FileURL says Path came from a file:// URL.
	FileURL bool
}

// Local reports whether s names a path of this host.
func (s Source) Local() bool { return s.URL == nil }

// ParseSource reads raw as a URL (https, http, ssh, git, file), an
// scp-like address (user@host:path) or a path. It checks the shape only;
// Policy.check decides whether the caller may use it.
func ParseSource(raw string) (Source, error) {
	src := Source{Raw: raw}
	if raw == "" {
		return src, invalid("empty source")
	}
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsControl(r) }) >= 0 {
		return src, invalid("source %q contains a control character", raw)
	}
	if i := strings.Index(raw, "://"); i > 0 && !strings.Contains(raw[:i], "/") {
		return parseURL(raw)
	}
	if isSCPLike(raw) {
		return parseSCP(raw)
	}
	src.Path = raw
	return src, nil
}

// isSCPLike follows git: a colon before any slash makes host:path.
func isSCPLike(s string) bool {
	colon := strings.Index(s, ":")
	if colon <= 0 {
		return false
	}
	slash := strings.Index(s, "/")
	return slash < 0 || colon < slash
}

func parseURL(raw string) (Source, error) {
	src := Source{Raw: raw}
	u, err := url.Parse(raw)
	if err != nil {
		return src, invalid("source %q is not a valid URL: %v", raw, err)
	}
	switch u.Scheme = strings.ToLower(u.Scheme); u.Scheme {
	case "https", "http", "ssh", "git":
	case "file":
		if u.Host != "" && u.Host != "localhost" || u.User != nil {
			return src, invalid("source %s: a file:// URL names a path of this host (file:///path), not host %q", raw, u.Host)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
			return src, invalid("source %s: write a local repository as file:///absolute/path", raw)
		}
		src.Path, src.FileURL = u.Path, true
		return src, nil
	default:
		return src, invalid("source %s: scheme %q is not supported; use https (or ssh, git, http, file where the server allows them)", raw, u.Scheme)
	}
	if u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return src, invalid("source %s: a git URL has no query or fragment", raw)
	}
	if err := checkHost(raw, u.Hostname(), strings.HasPrefix(u.Host, "[")); err != nil {
		return src, err
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return src, invalid("source %s: port %q is not a port number", raw, p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return src, invalid("source %s: empty port", raw)
	}
	if u.User != nil {
		if _, hasPw := u.User.Password(); hasPw {
			return src, invalid("source URL carries a password; use a credential helper instead of putting secrets in the URL")
		}
	}
	src.URL = u
	return src, nil
}

// parseSCP reads [user@]host:path as ssh://[user@]host/path.
func parseSCP(raw string) (Source, error) {
	src := Source{Raw: raw}
	hostPart, path, _ := strings.Cut(raw, ":")
	user, host, hasUser := strings.Cut(hostPart, "@")
	if !hasUser {
		host, user = user, ""
	}
	bracketed := strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]")
	if bracketed {
		host = host[1 : len(host)-1]
	}
	if err := checkHost(raw, host, bracketed); err != nil {
		return src, err
	}
	if hasUser && (user == "" || strings.ContainsAny(user, "@/ ")) {
		return src, invalid("source %s: %q is not a user name", raw, user)
	}
	if path == "" {
		return src, invalid("source %s: no repository path after the colon", raw)
	}
	u := &url.URL{Scheme: "ssh", Host: host, Path: path}
	if bracketed {
		u.Host = "[" + host + "]"
	}
	if user != "" {
		u.User = url.User(user)
	}
	src.URL = u
	return src, nil
}

// checkHost accepts a DNS name or a canonical IP literal. Numbers a C
// resolver would read as IPv4 in other notations (2130706433, 0x7f.1,
// 0177.0.0.1, 127.1) are refused outright: whatever resolves them later
// must not be the one to decide what they mean.
func checkHost(raw, host string, bracketed bool) error {
	if host == "" {
		return invalid("source %s: no host", raw)
	}
	if bracketed {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return invalid("source %s: [%s] is not an IPv6 address", raw, host)
		}
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is6() {
			return invalid("source %s: write an IPv6 address in brackets", raw)
		}
		return nil
	}
	if looseIPv4(host) {
		return invalid("source %s: %q reads as an IP address in a non-standard notation; write the address as a.b.c.d", raw, host)
	}
	name := strings.TrimSuffix(host, ".")
	if len(name) > 253 {
		return invalid("source %s: host name too long", raw)
	}
	for _, label := range strings.Split(name, ".") {
		if !validLabel(label) {
			return invalid("source %s: %q is not a valid host name", raw, host)
		}
	}
	return nil
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range l {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// looseIPv4 reports whether host is one to four numbers (decimal, 0-octal
// or 0x-hex) separated by dots: what inet_aton would take for an address.
func looseIPv4(host string) bool {
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		if _, err := strconv.ParseUint(p, 0, 64); err != nil {
			lower := strings.ToLower(p)
			if lower != "0x" && !strings.HasPrefix(lower, "0x") {
				return false
			}
		}
	}
	return true
}

// displayURL is u without its user name, for messages and progress.
func displayURL(s Source) string {
	if s.URL == nil {
		return s.Raw
	}
	u := *s.URL
	u.User = nil
	return u.String()
}

// String returns what a session records as its source.
func (s Source) String() string {
	if s.URL != nil {
		return s.Raw
	}
	if s.FileURL {
		return "file://" + s.Path
	}
	return s.Path
}

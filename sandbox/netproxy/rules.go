package netproxy

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/sessions/bound"
)

// Rule allows one host pattern, on one port or on the web's ports.
type Rule struct {
	// Host is a name ("registry.npmjs.org"), a wildcard ("*.github.com":
	// every name below github.com, not github.com itself) or an IP address.
	Host string
	// Port is the one port allowed; 0 allows 80 and 443.
	Port uint16
}

// String renders the rule as ParseRule reads it.
func (r Rule) String() string {
	h := r.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if r.Port != 0 {
		return h + ":" + strconv.Itoa(int(r.Port))
	}
	return h
}

// matches reports whether the rule allows host h on port.
func (r Rule) matches(h Host, port uint16) bool {
	if r.Port == 0 && port != 80 && port != 443 || r.Port != 0 && r.Port != port {
		return false
	}
	if h.Name == "" {
		return r.Host == h.IP.String()
	}
	if suffix, ok := strings.CutPrefix(r.Host, "*."); ok {
		return strings.HasSuffix(h.Name, "."+suffix)
	}
	return r.Host == h.Name
}

// ParseRule reads "host", "host:port", "*.domain", "*.domain:port",
// "1.2.3.4:8080" or "[2001:db8::1]:443".
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	host, port := s, uint16(0)
	if len(s) > bound.Target {
		return Rule{}, fmt.Errorf("allow %q: %d bytes; a host name is at most 253", shown(s), len(s))
	}
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return Rule{}, fmt.Errorf("allow %q: port %q is not a number from 1 to 65535", s, p)
		}
		host, port = h, uint16(n)
	} else if strings.HasPrefix(s, "[") {
		host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	if host == "*" || host == "" {
		return Rule{}, fmt.Errorf("allow %q: a pattern must name a host or a domain (*.example.com); "+
			"to give a session the whole network use mode host", s)
	}
	wild := strings.HasPrefix(host, "*.")
	name := strings.TrimPrefix(host, "*.")
	if strings.Contains(name, "*") {
		return Rule{}, fmt.Errorf("allow %q: '*' is only allowed as the first label (*.example.com)", s)
	}
	h, err := ParseHost(name)
	if err != nil {
		return Rule{}, fmt.Errorf("allow %q: %w", s, err)
	}
	if wild && h.Name == "" {
		return Rule{}, fmt.Errorf("allow %q: a wildcard needs a domain name, not an address", s)
	}
	if wild && !strings.Contains(h.Name, ".") {
		return Rule{}, fmt.Errorf("allow %q: a wildcard over a top-level domain is too broad", s)
	}
	out := h.String()
	if wild {
		out = "*." + out
	}
	return Rule{Host: out, Port: port}, nil
}

// DefaultPresets are the named groups an allowlist may use instead of
// listing hosts: what package managers and git need to fetch.
var DefaultPresets = map[string][]string{
	"npm":    {"registry.npmjs.org", "registry.yarnpkg.com"},
	"pypi":   {"pypi.org", "files.pythonhosted.org"},
	"go":     {"proxy.golang.org", "sum.golang.org", "index.golang.org", "storage.googleapis.com"},
	"github": {"github.com", "*.github.com", "*.githubusercontent.com"},
	"debian": {"deb.debian.org", "security.debian.org"},
}

// MaxAllow is the most entries an allowlist may have: a session keeps its
// allowlist in the database and in memory, and a refusal lists it.
const MaxAllow = 256

// Expand turns an allowlist as a user writes it (preset names and
// patterns) into sorted, deduplicated rules. presets nil means
// DefaultPresets.
func Expand(items []string, presets map[string][]string) ([]Rule, error) {
	if presets == nil {
		presets = DefaultPresets
	}
	seen := map[Rule]bool{}
	var out []Rule
	if len(items) > MaxAllow {
		return nil, fmt.Errorf("the allowlist has %d entries, over the limit of %d: name domains with wildcards (*.example.com) or presets", len(items), MaxAllow)
	}
	for _, it := range items {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		pats := []string{it}
		if p, ok := presets[it]; ok {
			pats = p
		} else if !strings.ContainsAny(it, ".:[*") {
			return nil, fmt.Errorf("allow %q: no preset of that name (presets: %s) and not a host name with a domain",
				shown(it), strings.Join(presetNames(presets), ", "))
		}
		for _, pat := range pats {
			r, err := ParseRule(pat)
			if err != nil {
				return nil, err
			}
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func presetNames(m map[string][]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// allows reports whether any rule allows host h on port.
func allows(rules []Rule, h Host, port uint16) bool {
	for _, r := range rules {
		if r.matches(h, port) {
			return true
		}
	}
	return false
}

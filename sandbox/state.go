package sandbox

import (
	"sort"
	"strings"
)

// parseExports reads the output of dash's or bash's `export -p`:
//
//	export NAME='value with '\''quotes'\'' and
//	newlines'
//	export FLAG
//	declare -x NAME="value"    (bash)
//
// Variables exported without a value are skipped. Unparseable lines are
// skipped rather than failing: the state is best effort, the command's
// result is not.
func parseExports(s string) map[string]string {
	env := make(map[string]string)
	for len(s) > 0 {
		line := s
		if strings.HasPrefix(s, "export ") {
			s = s[len("export "):]
		} else if strings.HasPrefix(s, "declare -x ") {
			s = s[len("declare -x "):]
		} else {
			s = skipLine(s)
			continue
		}
		name := s
		if i := strings.IndexAny(s, "=\n"); i >= 0 {
			name = s[:i]
			s = s[i:]
		} else {
			s = ""
		}
		if !strings.HasPrefix(s, "=") {
			s = skipLine(s)
			continue
		}
		value, rest, ok := unquoteShellWord(s[1:])
		if !ok || !validEnvName(name) {
			s = skipLine(line[len(line)-len(s):])
			continue
		}
		env[name] = value
		s = skipLine(rest)
	}
	return env
}

func skipLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// unquoteShellWord decodes one shell word made of single-quoted parts,
// double-quoted parts, backslash escapes and bare characters, up to the
// first unquoted newline or blank.
func unquoteShellWord(s string) (value, rest string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", s, false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case '"':
			i++
			for {
				if i >= len(s) {
					return "", s, false
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
				i++
			}
		case '\\':
			if i+1 >= len(s) {
				return "", s, false
			}
			b.WriteByte(s[i+1])
			i += 2
		case '\n', ' ', '\t':
			return b.String(), s[i:], true
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), "", true
}

// restoreScript renders a state as shell commands that recreate it in a
// fresh shell. The workspace root is the fallback when the saved directory
// is gone.
func restoreScript(st State) string {
	var b strings.Builder
	keys := make([]string, 0, len(st.Env))
	for k := range st.Env {
		if validEnvName(k) && !skipOnRestore[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("export " + k + "=" + shellQuote(st.Env[k]) + "\n")
	}
	if st.Cwd != "" {
		b.WriteString("cd -- " + shellQuote(st.Cwd) + " 2>/dev/null || cd " + MountPoint + "\n")
	}
	return b.String()
}

// skipOnRestore lists variables the shell maintains itself.
var skipOnRestore = map[string]bool{"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

package metering

import (
	"regexp"
	"strings"
)

// Redacted replaces every secret Redact finds.
const Redacted = "[REDACTED]"

// redaction is one secret pattern. Patterns with a prefix group (group 1: "password=",
// "Bearer ", "https://user:") keep it so that the redacted text still reads; a pattern with a
// suffix group (group 3, the "@" of a URL) keeps that too.
type redaction struct {
	re     *regexp.Regexp
	prefix bool
	// keepValue, when set, lets a matched value through (numbers in "max_tokens: 100").
	keepValue func(string) bool
}

// redactions run in order: PEM blocks first, since their base64 bodies would otherwise be
// partially matched by the token patterns and survive in pieces.
var redactions = []redaction{
	// Private keys in PEM (RSA, EC, OPENSSH, ENCRYPTED, PGP ...), whole block.
	{re: regexp.MustCompile(`-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----[\s\S]*?-----END ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----`)},
	// Authorization schemes: "Bearer xxx", "Basic xxx".
	{re: regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)([A-Za-z0-9._~+/=-]{8,})`), prefix: true},
	// password=..., "api_key": "...", AWS_SECRET_ACCESS_KEY=... (env files, configs, JSON, URLs).
	{
		re:        regexp.MustCompile(`(?i)(\b[a-z0-9_.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credential)[a-z0-9_.-]*["']?\s*[=:]\s*)("[^"\n]*"|'[^'\n]*'|[^\s"'&;,]+)`),
		prefix:    true,
		keepValue: isHarmlessValue,
	},
	// Credentials in URLs: scheme://user:password@host.
	{re: regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)([^\s@/]+)(@)`), prefix: true},
	// OpenAI, Anthropic and similar "sk-" keys (sk-proj-..., sk-ant-api03-...).
	{re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`)},
	// GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained.
	{re: regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`)},
	{re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,}\b`)},
	// AWS access key ids; their secret keys are caught by the key=value pattern.
	{re: regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`)},
	// Slack tokens.
	{re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
	// Google API keys.
	{re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
	// warren's own bearer tokens ('warren token create'): "wrn_" and 43
	// base64url characters. The prefix the token list shows (wrn_ and 6)
	// is too short to match. Its OAuth secrets (package mcp/oauth) have
	// the same form: access (wat_), refresh (wrt_) and client secrets
	// (wcs_), authorization codes (wac_).
	{re: regexp.MustCompile(`\bw(?:rn|at|rt|cs|ac)_[A-Za-z0-9_-]{20,}`)},
	// JSON Web Tokens.
	{re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}`)},
}

// isHarmlessValue lets through values of secret-sounding keys that cannot be secrets, so that
// usage logs ("max_tokens: 4096", "input_tokens=12") stay readable.
func isHarmlessValue(v string) bool {
	v = strings.Trim(v, `"'`)
	switch strings.ToLower(v) {
	case "", "true", "false", "null", "none":
		return true
	}
	if strings.HasPrefix(v, Redacted) {
		return true // already redacted; keeps Redact idempotent
	}
	return strings.Trim(v, "0123456789") == ""
}

// Redact replaces secrets in s with [REDACTED]: API keys (sk-..., Google, Slack), warren's
// own tokens (wrn_...), bearer and
// basic credentials, AWS access key ids, GitHub tokens, JWTs, private key PEM blocks,
// credentials in URLs, and the values of password=/secret=/token=/api_key= style pairs. Apply it
// to transcripts and anything else taken from model traffic before it is written. It errs
// towards redacting too much.
func Redact(s string) string {
	for _, r := range redactions {
		if !r.prefix {
			s = r.re.ReplaceAllLiteralString(s, Redacted)
			continue
		}
		s = r.re.ReplaceAllStringFunc(s, func(match string) string {
			g := r.re.FindStringSubmatch(match)
			if r.keepValue != nil && r.keepValue(g[2]) {
				return match
			}
			out := g[1] + Redacted
			if len(g) > 3 {
				out += g[3]
			}
			return out
		})
	}
	return s
}

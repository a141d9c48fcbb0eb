package events

import (
	"strings"
	"testing"

	"github.com/warrenhq/warren/metering"
)

// redact must find every secret metering.Redact finds, wherever it sits
// in a long output: alone on a line, at its end, with its value on the
// next line, or in a URL.
func TestRedactMatchesMeteringOnLongOutput(t *testing.T) {
	filler := strings.Repeat("compiling module 42 of 97: ok\n", 20)
	secrets := []string{
		"export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789AB\n",
		"password:\n  hunter2-is-long\n",
		"Authorization: Bearer\n abcdefghijklmnop\n",
		"cloning https://user:s3cr3tpassw0rd@example.com/repo.git\n",
		"key AKIAABCDEFGHIJKLMNOP found\n",
		"OPENAI_API_KEY = \"sk-proj-abcdefghijklmnopqrstuvwx\"\n",
		"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop\n",
		"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----\n",
		"slack xoxb-1234567890-abcdefghij\n",
		"token:\n",
	}
	for _, sec := range secrets {
		for _, text := range []string{filler + sec + filler, sec + filler, filler + sec, filler + strings.TrimSuffix(sec, "\n")} {
			if got, want := redact(text), metering.Redact(text); got != want {
				t.Errorf("redact differs from metering.Redact for %q:\n got %q\nwant %q", sec, got, want)
			}
		}
	}
}

func BenchmarkRedactOutput(b *testing.B) {
	s := strings.Repeat("compiling module 42 of 97: ok, 3 warnings\n", 100)
	for range b.N {
		redact(s)
	}
}

// A long line is redacted in pieces; a secret near where a piece ends is
// still found whole.
func TestRedactLongLinesInPieces(t *testing.T) {
	for _, sec := range []string{"password: hunter2secret", `"api_key": "abcdef0123456789"`, "Authorization: Bearer abcdefghijklmnopqrstuvwxyz"} {
		for pad := maxPiece - 60; pad < maxPiece+10; pad++ {
			line := strings.Repeat("a", pad) + " " + sec + " tail\n"
			got := redact(line)
			if strings.Contains(got, "hunter2secret") || strings.Contains(got, "abcdef0123456789") || strings.Contains(got, "abcdefghijklmnopqrstuvwxyz") {
				t.Fatalf("padding %d: the secret of %q survived", pad, sec)
			}
		}
	}
}

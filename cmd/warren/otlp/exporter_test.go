package otlp

import (
	"strings"
	"testing"
	"time"
)

// TestFromEnv: the standard variables, the traces-specific ones winning,
// and a bad value refused with the variable's name.
func TestFromEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=x%20y")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "c=3")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != "http://collector:4318/v1/traces" || len(c.Headers) != 1 || c.Headers["c"] != "3" ||
		c.Timeout != 2500*time.Millisecond || !c.Gzip {
		t.Errorf("config %+v", c)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://otel.example.com/custom")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "")
	if c, _ = FromEnv(); c.URL != "https://otel.example.com/custom" || c.Headers["b"] != "x y" {
		t.Errorf("traces endpoint used as it is, generic headers: %+v", c)
	}
	for name, value := range map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318",
		"OTEL_EXPORTER_OTLP_TIMEOUT":         "10s",
		"OTEL_EXPORTER_OTLP_COMPRESSION":     "zstd",
		"OTEL_EXPORTER_OTLP_HEADERS":         "novalue",
		"OTEL_EXPORTER_OTLP_CERTIFICATE":     t.TempDir() + "/missing.pem",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, value)
			if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_") {
				t.Errorf("%s=%s: %v, want an error naming the variable", name, value, err)
			}
		})
	}
}

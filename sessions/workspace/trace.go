package workspace

import "go.opentelemetry.io/otel"

// tracer makes the spans of git work (prepare, base, snapshot, diff);
// without a configured provider it is the global no-op.
var tracer = otel.Tracer("github.com/warrenhq/warren/sessions/workspace")

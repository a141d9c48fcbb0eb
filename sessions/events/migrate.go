package events

import (
	"context"
	"database/sql"
	"embed"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

// component is this package's key in the schema_versions table shared by
// every store.
const component = "events"

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrate applies the event log's migrations (sessions/sqlschema).
func Migrate(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, component, migrationFS, "migrations")
}

package sessions

import (
	"context"
	"database/sql"
	"embed"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

// component is this package's key in the schema_versions table shared by
// every store.
const component = "sessions"

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrate applies this package's embedded migrations that the database
// does not have yet (see package sqlschema).
func Migrate(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, component, migrationFS, "migrations")
}

package metering

import (
	"context"
	"database/sql"
	"embed"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

// component is this package's key in the schema_versions table shared by
// every store.
const component = "metering"

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrate applies this package's embedded migrations that the database
// does not have yet (see package sqlschema).
func migrate(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, component, migrationFS, "migrations")
}

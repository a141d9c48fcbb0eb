package sessions

import (
	"os"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

// TestMain builds the jail's runner: the tests start real jails.
func TestMain(m *testing.M) { os.Exit(runnertest.Main(m)) }

package sandbox

import (
	"os"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

func TestMain(m *testing.M) { os.Exit(runnertest.Main(m)) }

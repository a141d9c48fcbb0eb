package agent

import "github.com/warrenhq/warren/agent/provider"

// Offered returns the tools the model sees: for the tests of this package,
// which run as agent_test.
func (a *Agent) Offered() []provider.Tool { return a.offered }

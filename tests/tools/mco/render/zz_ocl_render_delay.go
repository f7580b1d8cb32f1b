package render

// Added to the MCO's pkg/controller/render by tests/tools/mco/build.sh; not part of the MCO.
//
// The render controller waits a fixed renderDelay (a const, 5 s upstream: render_controller.go,
// "a pause to avoid churn in MachineConfigs") after every event before it renders a pool. The node
// controller's delay has a test constructor (node.NewWithCustomUpdateDelay); this one has none, so
// build.sh sets the const to OclRenderDelayForTests, the one change made to the MCO's code. What
// the controller renders, and when relative to other events, is unchanged; only the wait is
// shorter, so that the suites on the real controllers fit make test's budget.

import "time"

// OclRenderDelayForTests is the renderDelay the harness is built with.
const OclRenderDelayForTests = 500 * time.Millisecond

// OclRenderDelay is the renderDelay this binary renders with (`ocl-mco-harness version`).
func OclRenderDelay() time.Duration { return renderDelay }

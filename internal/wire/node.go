package wire

// Node administrative modes (API.md "States"): the mode field of a node.
// Draining and maintenance suppress new work on the node; neither touches
// work in flight or desired state.
const (
	NodeModeActive      = "active"
	NodeModeDraining    = "draining"
	NodeModeMaintenance = "maintenance"
)

package hub

import (
	"context"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/wire"
)

// streamConfiguration is stream id's section of the configuration node
// nodeID runs, with literal credentials masked (secret references stay as
// written, never resolved), when the node runs a Hub apply and that
// version defines the stream; nil otherwise: a node running its own
// configuration (a local apply, its --config file) has a text the Hub
// does not hold. A failed read is nil too: the view goes out without it.
func (h *Hub) streamConfiguration(ctx context.Context, nodeID, id string) *wire.StreamConfiguration {
	ncs, err := h.st.NodeConfigs(ctx, []string{nodeID})
	if err != nil {
		return nil
	}
	o := ncs[nodeID].Observed
	if o == nil || o.HubVersion == "" {
		return nil
	}
	v, err := h.st.GetConfigVersion(ctx, nodeID, o.HubVersion)
	if err != nil {
		return nil
	}
	f, err := config.ParseFormat(v.Format)
	if err != nil {
		return nil
	}
	tree, err := config.Tree(config.MaskCredentials([]byte(v.Content), f), f)
	if err != nil {
		return nil
	}
	doc, _ := tree.(map[string]any)
	streams, _ := doc["streams"].([]any)
	for _, s := range streams {
		if m, ok := s.(map[string]any); ok && m["id"] == id {
			return &wire.StreamConfiguration{ConfigVersion: v.Version, Definition: m}
		}
	}
	return nil
}

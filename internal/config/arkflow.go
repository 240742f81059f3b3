package config

// arkflowNulls replaces the nulls ArkFlow accepts where the schema wants a
// value: `processors:` with only comments under it (YAML null) is an
// empty list. The key stays required; only its null value is read as [].
func arkflowNulls(tree any) any {
	root, _ := tree.(map[string]any)
	streams, _ := root["streams"].([]any)
	for _, s := range streams {
		sm, _ := s.(map[string]any)
		p, _ := sm["pipeline"].(map[string]any)
		if v, present := p["processors"]; present && v == nil {
			p["processors"] = []any{}
		}
	}
	return tree
}

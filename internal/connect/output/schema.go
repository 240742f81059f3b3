package output

import "github.com/flowplane/flowplane/internal/component"

func appendNewlineProp() map[string]any {
	return component.Prop("boolean", "Write a newline after each message.", true)
}

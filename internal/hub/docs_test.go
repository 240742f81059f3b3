package hub

import (
	"os"
	"strings"
	"testing"
)

// TestHubAPIDocListsEveryRoute keeps docs/hub-api.md in step with the route
// table: every operator and agent route has a row "| METHOD | `{p}/path`"
// (an action route may be listed on the row of its first sibling action:
// "`{p}/.../start`, `/stop`, `/restart`"), and every open route is named.
func TestHubAPIDocListsEveryRoute(t *testing.T) {
	doc, err := os.ReadFile("../../docs/hub-api.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	th := serve(t, dbPath(t), "", true)
	routes := th.h.Routes()
	if len(routes) < 30 {
		t.Fatalf("only %d routes: the route table changed shape", len(routes))
	}
	for _, r := range routes {
		if r.Method == "HEAD" {
			continue
		}
		if r.Public {
			if !strings.Contains(text, "`"+r.Pattern+"`") {
				t.Errorf("docs/hub-api.md does not name the open route %s", r.Pattern)
			}
			continue
		}
		path := "{p}" + strings.TrimPrefix(r.Pattern, APIPrefix)
		if !strings.Contains(text, "| "+r.Method+" | `"+path+"`") && !siblingRow(text, r.Method, path) {
			t.Errorf("docs/hub-api.md has no row for %s %s (looked for %q)", r.Method, r.Pattern, "| "+r.Method+" | `"+path+"`")
		}
	}
}

// siblingRow reports whether text has a row of method listing path's last
// segment as a sibling of a start action: "| POST | `{p}/x/start`, `/stop`".
func siblingRow(text, method, path string) bool {
	i := strings.LastIndex(path, "/")
	row := "| " + method + " | `" + path[:i] + "/start`"
	at := strings.Index(text, row)
	if at < 0 {
		return false
	}
	line, _, _ := strings.Cut(text[at:], "\n")
	return strings.Contains(line, "`"+path[i:]+"`")
}

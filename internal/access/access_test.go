package access_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/access"
)

func scopes(t *testing.T, ss ...string) []access.Scope {
	t.Helper()
	out, err := access.ParseScopes(ss)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAllow(t *testing.T) {
	viewer := access.Principal{ID: "v", Roles: []access.Role{access.Viewer}}
	operator := access.Principal{ID: "o", Roles: []access.Role{access.Operator}}
	admin := access.Principal{ID: "a", Roles: []access.Role{access.Admin}}
	edge := access.Principal{ID: "e", Roles: []access.Role{access.Operator}, Scopes: scopes(t, "node:edge-*")}
	etl := access.Principal{ID: "ci", Roles: []access.Role{access.Admin}, Scopes: scopes(t, "job:etl-*", "rollout:*")}
	one := access.Principal{ID: "s", Roles: []access.Role{access.Operator}, Scopes: scopes(t, "stream:edge-1/orders")}
	stream := func(n, s string) access.Resource { return access.Resource{Node: n, Stream: s} }
	fleet := access.Resource{}
	tests := []struct {
		name    string
		p       access.Principal
		perm    access.Permission
		res     access.Resource
		ok      bool
		missing access.Missing
	}{
		{"viewer reads", viewer, access.Read, stream("n1", "s"), true, access.Missing{}},
		{"viewer cannot start", viewer, access.StreamOperate, stream("n1", "s"), false, access.Missing{Permission: access.StreamOperate}},
		{"viewer cannot cancel", viewer, access.OperationCancel, fleet, false, access.Missing{Permission: access.OperationCancel}},
		{"operator starts", operator, access.StreamOperate, stream("n1", "s"), true, access.Missing{}},
		{"operator drains", operator, access.NodeOperate, access.Resource{Node: "n1"}, true, access.Missing{}},
		{"operator checkpoints", operator, access.JobOperate, access.Resource{Job: "j"}, true, access.Missing{}},
		{"operator cannot create jobs", operator, access.JobAdmin, access.Resource{Job: "*"}, false, access.Missing{Permission: access.JobAdmin}},
		{"operator cannot apply configuration", operator, access.ConfigurationAdmin, access.Resource{Node: "n1"}, false, access.Missing{Permission: access.ConfigurationAdmin}},
		{"operator cannot forget nodes", operator, access.NodeAdmin, access.Resource{Node: "n1"}, false, access.Missing{Permission: access.NodeAdmin}},
		{"operator cannot roll out", operator, access.RolloutAdmin, access.Resource{Rollout: "*"}, false, access.Missing{Permission: access.RolloutAdmin}},
		{"admin forgets", admin, access.NodeAdmin, access.Resource{Node: "n1"}, true, access.Missing{}},
		{"admin tokens", admin, access.TokenAdmin, fleet, true, access.Missing{}},
		{"no role", access.Principal{ID: "x"}, access.Read, fleet, false, access.Missing{Permission: access.Read}},
		{"node scope: own stream", edge, access.StreamOperate, stream("edge-1", "s"), true, access.Missing{}},
		{"node scope: own node", edge, access.NodeOperate, access.Resource{Node: "edge-2"}, true, access.Missing{}},
		{"node scope: other node", edge, access.StreamOperate, stream("core-1", "s"), false, access.Missing{Permission: access.StreamOperate, Resource: "stream:core-1/s"}},
		{"node scope: other node read", edge, access.Read, access.Resource{Node: "core-1"}, false, access.Missing{Permission: access.Read, Resource: "node:core-1"}},
		{"node scope: fleet read", edge, access.Read, fleet, true, access.Missing{}},
		{"node scope: fleet write", edge, access.OperationCancel, fleet, false, access.Missing{Permission: access.OperationCancel, Resource: "fleet"}},
		{"node scope: jobs are not on the node", edge, access.JobOperate, access.Resource{Job: "j"}, false, access.Missing{Permission: access.JobOperate, Resource: "job:j"}},
		{"job scope: match", etl, access.JobAdmin, access.Resource{Job: "etl-orders"}, true, access.Missing{}},
		{"job scope: no match", etl, access.JobOperate, access.Resource{Job: "billing"}, false, access.Missing{Permission: access.JobOperate, Resource: "job:billing"}},
		{"job scope: create needs job:*", etl, access.JobAdmin, access.Resource{Job: "*"}, false, access.Missing{Permission: access.JobAdmin, Resource: "job:*"}},
		{"rollout scope", etl, access.RolloutAdmin, access.Resource{Rollout: "*"}, true, access.Missing{}},
		{"rollout scope: not nodes", etl, access.ConfigurationAdmin, access.Resource{Node: "n1"}, false, access.Missing{Permission: access.ConfigurationAdmin, Resource: "node:n1"}},
		{"stream scope: match", one, access.StreamOperate, stream("edge-1", "orders"), true, access.Missing{}},
		{"stream scope: other stream", one, access.StreamOperate, stream("edge-1", "billing"), false, access.Missing{Permission: access.StreamOperate, Resource: "stream:edge-1/billing"}},
		{"stream scope: not the node", one, access.NodeOperate, access.Resource{Node: "edge-1"}, false, access.Missing{Permission: access.NodeOperate, Resource: "node:edge-1"}},
		{"roles add up", access.Principal{Roles: []access.Role{access.Viewer, access.Admin}}, access.TokenAdmin, fleet, true, access.Missing{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, missing := access.Allow(tt.p, tt.perm, tt.res)
			if ok != tt.ok {
				t.Errorf("Allow = %v, want %v", ok, tt.ok)
			}
			if diff := cmp.Diff(tt.missing, missing); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRolesNest checks that each role grants everything the one before it
// grants.
func TestRolesNest(t *testing.T) {
	perms := []access.Permission{access.Read, access.StreamOperate, access.JobOperate, access.NodeOperate, access.OperationCancel,
		access.Check, access.JobAdmin, access.ConfigurationAdmin, access.RolloutAdmin, access.NodeAdmin, access.TokenAdmin}
	for i := 1; i < len(access.Roles); i++ {
		lo, hi := access.Roles[i-1], access.Roles[i]
		for _, p := range perms {
			if lo.Grants(p) && !hi.Grants(p) {
				t.Errorf("%s grants %s but %s does not", lo, p, hi)
			}
		}
	}
	if !access.Admin.Grants(access.TokenAdmin) || access.Operator.Grants(access.JobAdmin) || access.Viewer.Grants(access.StreamOperate) {
		t.Error("role boundaries moved")
	}
}

func TestParseScope(t *testing.T) {
	tests := []struct {
		in   string
		want access.Scope
		err  bool
	}{
		{in: "node:edge-*", want: access.Scope{Type: "node", Node: "edge-*"}},
		{in: "stream:edge-1/orders", want: access.Scope{Type: "stream", Node: "edge-1", ID: "orders"}},
		{in: "job:etl-*", want: access.Scope{Type: "job", ID: "etl-*"}},
		{in: "rollout:*", want: access.Scope{Type: "rollout", ID: "*"}},
		{in: "stream:edge-1", err: true},
		{in: "node:", err: true},
		{in: "node", err: true},
		{in: "cluster:x", err: true},
		{in: "job:[", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := access.ParseScope(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

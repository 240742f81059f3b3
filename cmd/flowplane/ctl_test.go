package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// Tokens of the Hubs the ctl scripts start.
const (
	ctlOperatorToken = "ctl-operator-token-0123456789"
	ctlNodeToken     = "ctl-node-token-0123456789"
)

// TestCtlScripts runs the flowplane ctl scripts in testdata/ctl against a
// real Hub (SQLite in $WORK) and real nodes, each started by the script.
// Each script gets its own free ports and configuration directory.
func TestCtlScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Hubs and nodes")
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/ctl",
		Setup: func(env *testscript.Env) error {
			for _, name := range []string{"HUB_PORT", "NODE_A_PORT", "NODE_B_PORT", "DATA_A_PORT", "DATA_B_PORT"} {
				p, err := loopbackPort()
				if err != nil {
					return err
				}
				env.Setenv(name, strconv.Itoa(p))
			}
			hub := "http://127.0.0.1:" + env.Getenv("HUB_PORT")
			env.Setenv("SVC_HUB_ADDRESS", "127.0.0.1:"+env.Getenv("HUB_PORT"))
			env.Setenv("SVC_HUB_STORAGE", env.WorkDir+"/hub.db")
			env.Setenv("SVC_OPERATOR_TOKEN", ctlOperatorToken)
			env.Setenv("SVC_NODE_TOKEN", ctlNodeToken)
			env.Setenv("FLOWPLANE_HUB", hub)
			env.Setenv("FLOWPLANE_TOKEN", ctlOperatorToken)
			env.Setenv("XDG_CONFIG_HOME", env.WorkDir+"/.config")
			env.Setenv("XDG_STATE_HOME", env.WorkDir+"/.state")
			env.Setenv("HOME", env.WorkDir+"/home")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitready": cmdWaitReady,
			"waitnode":  cmdWaitNode,
			"envsubst":  cmdEnvsubst,
		},
	})
}

// loopbackPort is a free loopback port.
func loopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor polls ok every 50 ms for at most 30 s.
func waitFor(ok func() bool) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ok() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// cmdWaitReady waits (at most 30 s) until GET URL answers 200.
func cmdWaitReady(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitready URL")
	}
	c := &http.Client{Timeout: 2 * time.Second}
	ok := waitFor(func() bool {
		resp, err := c.Get(args[0])
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ok {
		ts.Fatalf("%s: not ready within 30 s", args[0])
	}
}

// cmdWaitNode waits (at most 30 s) until the Hub shows each node online.
func cmdWaitNode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: waitnode NODE...")
	}
	c := &http.Client{Timeout: 2 * time.Second}
	for _, id := range args {
		ok := waitFor(func() bool {
			req, _ := http.NewRequest(http.MethodGet, "http://"+ts.Getenv("SVC_HUB_ADDRESS")+"/api/v1/nodes/"+id, nil)
			req.Header.Set("Authorization", "Bearer "+ts.Getenv("SVC_OPERATOR_TOKEN"))
			resp, err := c.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var n struct {
				Status string `json:"status"`
			}
			return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&n) == nil && n.Status == "online"
		})
		if !ok {
			ts.Fatalf("node %s: not online on the Hub within 30 s", id)
		}
	}
}

// cmdEnvsubst expands $VAR and ${VAR} in files, in place, with the
// script's environment (ports and paths a txtar file cannot know).
func cmdEnvsubst(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: envsubst FILE...")
	}
	for _, f := range args {
		text := ts.ReadFile(f)
		out := os.Expand(text, func(name string) string {
			if v := ts.Getenv(name); v != "" {
				return v
			}
			return "${" + name + "}" // not ours: a reference the node resolves
		})
		if err := os.WriteFile(ts.MkAbs(f), []byte(out), 0o600); err != nil {
			ts.Fatalf("envsubst %s: %v", f, err)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/flowplane/flowplane/internal/ctl"
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
			scriptPath(env)
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
			"capture":   cmdCapture,
		},
	})
}

// loopbackPort is a free loopback port.
func loopbackPort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, taken := handedOut.LoadOrStore(p, true); !taken {
			return p, nil
		}
	}
	return 0, errors.New("no loopback port that was not handed out before")
}

// handedOut holds the ports loopbackPort returned: tests run in parallel,
// and a port one test was given but has not bound yet must not be given
// to another.
var handedOut sync.Map

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

// cmdCapture sets VAR to the first group of REGEXP in the last command's
// stdout: a script reads an id from ctl's output instead of pasting it.
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: capture VAR REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if len(m) < 2 {
		ts.Fatalf("capture %s: no match of %q in stdout", args[0], args[1])
	}
	ts.Setenv(args[0], m[1])
}

// TestCtlFollowsPages lists a collection longer than the Hub's largest
// page (100) from a real Hub: every page, or --limit items.
func TestCtlFollowsPages(t *testing.T) {
	t.Parallel() // independent: own ports, own directories, own processes
	if testing.Short() {
		t.Skip("starts a Hub")
	}
	h := startHub(t, filepath.Join(t.TempDir(), "hub.db"))
	env := map[string]string{"FLOWPLANE_HUB": h.base, "FLOWPLANE_TOKEN": hubOperatorToken, "XDG_CONFIG_HOME": t.TempDir()}
	ctlRun := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := ctl.Main(context.Background(), append([]string{"ctl"}, args...), ctl.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
		if code != 0 {
			t.Fatalf("ctl %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	// Writes for a node that never registered: accepted, and they wait.
	const n = 130
	for i := range n {
		ctlRun("stream", "stop", fmt.Sprintf("ghost/s%03d", i))
	}
	lines := strings.Split(strings.TrimSpace(ctlRun("get", "operations")), "\n")
	if len(lines) != n+1 {
		t.Fatalf("get operations: %d lines, want a header and %d rows", len(lines), n)
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(ctlRun("get", "streams", "--node", "ghost", "-o", "json")), &items); err != nil || len(items) != n {
		t.Fatalf("get streams -o json: %d items, %v; want %d", len(items), err, n)
	}
	for _, limit := range []int{1, 30, 100, 101} {
		lines := strings.Split(strings.TrimSpace(ctlRun("get", "operations", "--limit", fmt.Sprint(limit))), "\n")
		if len(lines) != limit+1 {
			t.Errorf("--limit %d: %d rows", limit, len(lines)-1)
		}
	}
}

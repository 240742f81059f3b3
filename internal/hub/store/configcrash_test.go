package store

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

const crashConfigEnv = "FLOWPLANE_STORE_CRASH_CONFIG_DB"

// TestCrashConfigChild is the child of TestCrashConfig: 16 goroutines
// write configurations of four nodes and print "node generation version
// intent" after each write returned.
func TestCrashConfigChild(t *testing.T) {
	path := os.Getenv(crashConfigEnv)
	if path == "" {
		t.Skip("run by TestCrashConfig")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000 && ctx.Err() == nil; i++ {
				node := fmt.Sprint("n", g%4)
				id := fmt.Sprintf("g%d-%d", g, i)
				r, err := s.WriteConfig(ctx, cw(id, node, "written-by: "+id+"\n", t0))
				if err != nil {
					continue
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "%s %d %s %s\n", node, r.Generation, r.Version, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

// TestCrashConfig kills a child writing configurations with SIGKILL at a
// random point: per node, generations 1..n and n versions are on disk
// without gaps, each version made by the intent of its generation; the
// fleet-wide numbers are 1..N once each, every one with its content; and
// every write the child saw return is there with its content.
func TestCrashConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	type rec struct {
		node, version, id string
		gen               int64
	}
	var printed []rec
	path := crashChild(t, "TestCrashConfigChild", crashConfigEnv, func(line string) bool {
		var r rec
		if _, err := fmt.Sscanf(line, "%s %d %s %s", &r.node, &r.gen, &r.version, &r.id); err != nil {
			return false
		}
		printed = append(printed, r)
		return true
	})
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	ncs, err := s.NodeConfigs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for node, nc := range ncs {
		gen := nc.Desired.Generation
		page, err := s.ConfigVersions(ctx, node, Paging{Page: 1, PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if int64(page.Total) != gen || page.Items[0].Version != nc.Desired.ConfigVersion {
			t.Errorf("%s: %d versions, newest %s, generation %d desiring %s", node, page.Total, page.Items[0].Version, gen,
				nc.Desired.ConfigVersion)
		}
		if n := count(t, s, "SELECT COUNT(DISTINCT generation) FROM intents WHERE node_id = ? AND generation BETWEEN 1 AND ?",
			node, gen); int64(n) != gen {
			t.Errorf("%s: %d generations of intents, want %d", node, n, gen)
		}
		if n := count(t, s, "SELECT COUNT(*) FROM intents WHERE node_id = ?", node); int64(n) != gen {
			t.Errorf("%s: %d intents, want %d", node, n, gen)
		}
		// Each generation desired the version its intent's write made.
		if n := count(t, s, `SELECT COUNT(*) FROM intents i JOIN config_versions v ON v.node_id = i.node_id
			AND 'v' || v.seq = i.config_version WHERE i.node_id = ?
			AND v.content = 'written-by: ' || i.id || char(10)`, node); int64(n) != gen {
			t.Errorf("%s: %d intents match their version, want %d", node, n, gen)
		}
	}
	versions := count(t, s, "SELECT COUNT(*) FROM config_versions")
	if n := count(t, s, "SELECT COUNT(*) FROM config_contents c JOIN config_versions v ON v.seq = c.seq AND v.sha256 = c.sha256"); n != versions ||
		count(t, s, "SELECT COUNT(*) FROM config_contents") != versions || count(t, s, "SELECT MAX(seq) FROM config_contents") != versions {
		t.Errorf("fleet-wide numbers: %d versions, %d matching contents", versions, n)
	}
	for _, p := range printed {
		in, err := s.GetIntent(ctx, p.id)
		if err != nil || in.Generation != p.gen || in.ConfigVersion != p.version || in.NodeID != p.node {
			t.Errorf("returned write %+v lost: %+v, %v", p, in, err)
			continue
		}
		if v, err := s.GetConfigVersion(ctx, p.node, p.version); err != nil || v.Content != "written-by: "+p.id+"\n" {
			t.Errorf("version of %+v = %+v, %v", p, v, err)
		}
	}
}

package secretref_test

import (
	"fmt"
	"testing"

	"github.com/flowplane/flowplane/internal/secretref"
)

// benchTree is a configuration of n streams shaped like a real one: most
// strings hold no reference, a few hold one or two.
func benchTree(n int) any {
	streams := make([]any, n)
	for i := range streams {
		streams[i] = map[string]any{
			"id": fmt.Sprintf("orders-%d", i),
			"input": map[string]any{
				"type": "kafka", "brokers": []any{"${env:KAFKA_BROKER:-127.0.0.1:9092}", "kafka-2:9092"},
				"topics": []any{"orders"}, "consumer_group": "flowplane", "client_id": "node-a",
				"sasl": map[string]any{"mechanism": "PLAIN", "username": "${secret:KAFKA_USER}", "password": "${secret:KAFKA_PASSWORD}"},
			},
			"pipeline": map[string]any{"thread_num": 4.0, "processors": []any{
				map[string]any{"type": "json_to_arrow"},
				map[string]any{"type": "sql", "query": "SELECT id, amount * 100 AS cents FROM flow WHERE amount > 0"},
				map[string]any{"type": "expr", "expression": `amount > 10 && region == "eu"`},
			}},
			"output": map[string]any{
				"type": "http", "url": "https://sink.example.com/v1/ingest?tenant=${env:TENANT}", "method": "POST",
				"headers": map[string]any{"Authorization": "Bearer ${secret:SINK_TOKEN}", "Content-Type": "application/json"},
				"timeout": "5s", "retry_count": 3.0,
			},
			"durability": map[string]any{"enabled": true, "sync": "per_entry", "sync_interval_ms": 100.0},
		}
	}
	return map[string]any{
		"logging":      map[string]any{"level": "${env:LOG_LEVEL:-info}", "format": "json"},
		"health_check": map[string]any{"enabled": true, "address": "0.0.0.0:8080", "node_token": "${secret:NODE_TOKEN}", "hub_urls": []any{"https://hub:8443"}},
		"streams":      streams,
	}
}

func BenchmarkResolve(b *testing.B) {
	env := map[string]string{
		"SVC_SECRET_KAFKA_USER": "svc-flowplane", "SVC_SECRET_KAFKA_PASSWORD": "hunter2-but-longer",
		"TENANT": "acme", "SVC_SECRET_SINK_TOKEN": "eyJhbGciOiJIUzI1NiJ9.e30.x", "SVC_SECRET_NODE_TOKEN": "node-token",
	}
	res := secretref.Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	for _, n := range []int{1, 20} {
		tree := benchTree(n)
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := res.Resolve(tree); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Package nats: NATS core subjects and JetStream durable consumers, as input and output (nats.go).
package nats

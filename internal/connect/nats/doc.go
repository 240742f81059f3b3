// Package nats holds the NATS input and output (nats.go): core subjects and
// JetStream durable consumers.
package nats

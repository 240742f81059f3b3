// Package systemd holds flowplane's systemd units: flowplane-hub.service
// for a Hub and flowplane-node.service for an engine node or Agent
// (docs/deploy.md). It has no code; its test checks the units with
// systemd's own verifier and security analyzer.
package systemd

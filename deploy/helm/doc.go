// Package helm holds flowplane's Helm chart, deploy/helm/flowplane: a Hub
// on SQLite or PostgreSQL, Agents joining it, or a standalone node
// (docs/deploy.md). It has no code; its tests render every values profile
// with Helm's own library, decode each manifest strictly into the
// Kubernetes API types, check what the chart promises, and lint it.
//
// It is a module of its own so that Helm and the Kubernetes API types stay
// out of the product's module graph and its SBOM.
package helm

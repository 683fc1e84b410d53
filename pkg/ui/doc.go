// Package ui is the Antrea web UI's backend (cmd/antrea-ui): an HTTP
// server with the embedded TypeScript frontend (web/ui, built into assets/)
// and one small JSON API under /api/v1 feeding every page: the Summary
// (controller and agents from their AntreaControllerInfo/AntreaAgentInfo,
// feature gates, realization lag), Traceflow (pkg/antctl/query runs it,
// pkg/diagram draws it), Policies (Tiers, Antrea-native, K8s and SIG
// policies with their Pods, per-Node realization and the stats API's
// counts: policies.go, computed.go), Pipeline (pkg/diagram's OVS pipeline
// with a Node's flows and packets from its agent API: agentapi.go) and
// Flows (a service map from the Flow Aggregator's API: flows.go).
//
// It reads the cluster through pkg/antctl/query. Access is by one admin
// password, bcrypt-hashed in a Secret (auth.go), the session then acting
// with the UI's own service account; or by a Kubernetes bearer token that
// kube-apiserver reviews, the session then acting with that token
// (token.go). A session is an HttpOnly, SameSite=Strict cookie, every
// state-changing call carries the session's CSRF token in X-CSRF-Token, and
// every response carries a strict Content-Security-Policy.
package ui

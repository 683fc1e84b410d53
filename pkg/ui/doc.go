// Package ui is the Antrea web UI's backend (cmd/antrea-ui): an HTTP
// server with the embedded TypeScript frontend (web/ui, built into assets/)
// and one small JSON API under /api/v1 feeding every page: the Summary
// (controller and agents from their AntreaControllerInfo/AntreaAgentInfo,
// feature gates), Traceflow (pkg/antctl/query runs it, pkg/diagram draws
// it), Policies (Tiers, Antrea-native and K8s NetworkPolicies with the
// stats API's counts), Pipeline (pkg/diagram's OVS pipeline with a Node's
// flow counts) and Flows.
//
// It reads the cluster through pkg/antctl/query with its own service
// account. Access is by one admin password, bcrypt-hashed in a Secret
// (auth.go); a session is an HttpOnly, SameSite=Strict cookie, every
// state-changing call carries the session's CSRF token in X-CSRF-Token, and
// every response carries a strict Content-Security-Policy.
package ui

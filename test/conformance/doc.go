// Package conformance checks Kubernetes NetworkPolicy semantics on a real
// antrea-lab cluster against oracles this project did not write: for every
// case it applies policies, probes every pod pair on TCP and UDP ports 80 and
// 81 from inside the source pod, and compares the observed matrix with the
// one computed by cyclonus' pkg/matcher and kube-network-policies'
// EvaluatePolicyDirection (which must agree with each other).
//
// The model is the one of the upstream Kubernetes netpol tests: namespaces
// x, y and z labelled ns=<name>, pods a, b and c in each labelled pod=<name>,
// spread over the lab's nodes. `go test` runs a representative subset;
// ANTREA_CONFORMANCE=all runs every case (all of cyclonus' generator).
package conformance

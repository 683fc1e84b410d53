// Package openapi holds the generated OpenAPI definitions of the served
// controlplane.antrea.io types and the meta types they embed
// (hack/codegen-k8s.sh).
package openapi

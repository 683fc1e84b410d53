// Package admissiontest holds what the tests of the Antrea-native policy
// admission share: upstream Antrea's docs examples
// (../testdata/upstream-docs-examples.yaml), read once here for the unit
// tests of pkg/controller/admission and the kubectl tests of test/manifest.
package admissiontest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Example is one object of upstream's docs examples.
type Example struct {
	Kind, Namespace, Name string
	// YAML is the object as the docs write it.
	YAML []byte
}

// UpstreamDocsExamples returns the objects of upstream's
// docs/antrea-network-policy.md examples, in the docs' order.
func UpstreamDocsExamples() ([]Example, error) {
	_, self, _, _ := runtime.Caller(0)
	file := filepath.Join(filepath.Dir(self), "..", "testdata", "upstream-docs-examples.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var examples []Example
	dec := utilyaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(data)))
	for {
		buf := make([]byte, 1<<20)
		n, err := dec.Read(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(buf[:n], &meta); err != nil {
			return nil, fmt.Errorf("an example of %s is not YAML: %w", file, err)
		}
		if meta.Kind == "" {
			continue // a comment-only document
		}
		examples = append(examples, Example{meta.Kind, meta.Namespace, meta.Name, append([]byte(nil), buf[:n]...)})
	}
	if len(examples) < 30 {
		return nil, fmt.Errorf("%s holds %d objects, want every object of the upstream docs", file, len(examples))
	}
	return examples, nil
}

// Unsupported are the examples this Antrea refuses as not supported, by the
// field it names: none since layer 7 rules are enforced (they were the
// l7Protocols examples).
var Unsupported = map[string]string{}

// RefusedByUpstream are the examples upstream itself refuses (its CRD
// schema's action enum has no "Deny": a slip of its docs), by the field named.
var RefusedByUpstream = map[string]string{
	"allow-self-ns":                  "spec.ingress[1].action",
	"deny-self-ns-a-to-b":            "spec.ingress[0].action",
	"isolation-based-on-org":         "spec.ingress[1].action",
	"isolation-based-on-org-and-env": "spec.ingress[1].action",
}

// ReferencedClusterGroups and ReferencedGroups (Namespace default) are the
// groups the examples use but define "separately": a test creates them first.
var (
	ReferencedClusterGroups = []string{"test-cg-with-db-selector", "test-cg-with-frontend-selector", "test-cg-with-ip-block"}
	ReferencedGroups        = []string{"test-grp-with-db-selector", "test-grp-with-frontend-selector", "test-grp-with-ip-block"}
)

// Package version holds the build's version, set through -ldflags -X by the Makefile.
package version

import "fmt"

// Set at build time: -X antrea.io/antrea/pkg/version.Version=... etc.
var (
	Version      = "v0.0.0-dev"
	GitSHA       = "unknown"
	GitTreeState = "unknown"
)

// String is the one-line version every binary prints for --version.
func String(binary string) string {
	return fmt.Sprintf("%s %s (git %s, tree %s)", binary, Version, GitSHA, GitTreeState)
}

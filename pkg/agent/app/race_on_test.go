//go:build race

package app

// raceDetector says whether the tests run under Go's race detector.
const raceDetector = true

// Package diagram draws the project's pictures, once, for every program
// that shows them: a Traceflow's path (TraceflowSVG, TraceflowDOT), the
// OVS pipeline (Pipeline built from the declared layout or a node's flows,
// PipelineSVG, PipelineDot) and the service map of the Flow Aggregator's
// records (ServiceMapSVG). antctl prints them; the web UI (pkg/ui)
// serves the same SVG. The output depends only on the input (no map order,
// no clock), so committed pictures can be compared byte for byte.
package diagram

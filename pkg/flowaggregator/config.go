package flowaggregator

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ConfigFileName is the configuration file's name, upstream's.
const ConfigFileName = "flow-aggregator.conf"

// Config is flow-aggregator.conf: upstream's keys where upstream has them
// (build/charts/flow-aggregator/conf), plus correlationWait and the
// flowLogger's JSON format, which are this project's.
type Config struct {
	// Mode is "Aggregate" (correlate both nodes' records). Upstream's
	// "Proxy" is not built.
	Mode string `json:"mode"`
	// ActiveFlowRecordTimeout and InactiveFlowRecordTimeout: upstream's
	// keys. Every record is output as soon as it is complete; a live
	// connection of which no record came for the active timeout is output
	// again then (Aggregator); one of which no record came for the inactive
	// timeout is forgotten (and its throughput starts afresh).
	ActiveFlowRecordTimeout   string `json:"activeFlowRecordTimeout"`
	InactiveFlowRecordTimeout string `json:"inactiveFlowRecordTimeout"`
	// AggregatorTransportProtocol is how the agents' IPFIX comes (port
	// 4739): "tcp" and "udp" both listen; "tls" is IPFIX over TLS on the
	// TCP port (no UDP); "none" no IPFIX. The gRPC collector (port 14739,
	// TLS) listens whatever it says.
	AggregatorTransportProtocol string `json:"aggregatorTransportProtocol"`
	// FlowAggregatorAddress is an extra name (DNS name or IP) of the
	// server certificate, besides the Service's DNS names: the address of
	// agents that name the aggregator by it.
	FlowAggregatorAddress string `json:"flowAggregatorAddress"`
	// CorrelationWait bounds how long a node's record of an inter-node
	// connection waits for the other node's (this project's key).
	CorrelationWait string `json:"correlationWait"`
	APIServer       struct {
		// APIPort serves the HTTP API (/flows, /flows/stream, /metrics).
		APIPort int `json:"apiPort"`
	} `json:"apiServer"`
	FlowCollector    FlowCollectorConfig `json:"flowCollector"`
	FlowLogger       FlowLoggerConfig    `json:"flowLogger"`
	RecordBufferSize int                 `json:"recordBufferSize"`
}

// FlowCollectorConfig is the flowCollector section: an IPFIX collector.
type FlowCollectorConfig struct {
	Enable bool `json:"enable"`
	// Address is HOST:PORT[:PROTO], PROTO tcp (default) or udp.
	Address             string  `json:"address"`
	ObservationDomainID *uint32 `json:"observationDomainID,omitempty"`
	// RecordFormat is "IPFIX"; upstream's "JSON" is not built.
	RecordFormat           string `json:"recordFormat"`
	TemplateRefreshTimeout string `json:"templateRefreshTimeout"`
	MaxIPFIXMsgSize        int    `json:"maxIPFIXMsgSize"`
}

// FlowLoggerConfig is the flowLogger section: a local log of records.
type FlowLoggerConfig struct {
	Enable bool   `json:"enable"`
	Path   string `json:"path"`
	// MaxSize is the log's size in MB before it is rotated; MaxBackups
	// how many rotated files are kept.
	MaxSize    int `json:"maxSize"`
	MaxBackups int `json:"maxBackups"`
	// RecordFormat is "JSON" (one object per line); upstream's "CSV" is
	// not built.
	RecordFormat string `json:"recordFormat"`
}

// DefaultConfig is the configuration of an empty file.
func DefaultConfig() Config {
	c := Config{Mode: "Aggregate", ActiveFlowRecordTimeout: "60s", InactiveFlowRecordTimeout: "90s",
		AggregatorTransportProtocol: "tcp", CorrelationWait: "10s", RecordBufferSize: 8192}
	c.APIServer.APIPort = 10348
	c.FlowCollector = FlowCollectorConfig{RecordFormat: "IPFIX", TemplateRefreshTimeout: "600s"}
	c.FlowLogger = FlowLoggerConfig{Path: "/tmp/antrea-flows.log", MaxSize: 100, MaxBackups: 3, RecordFormat: "JSON"}
	return c
}

// upstreamNotBuilt are upstream's sections this aggregator does not have:
// accepted while disabled (upstream's rendered file has them all), refused
// when enabled.
var upstreamNotBuilt = map[string]string{
	"clickHouse":        "export to ClickHouse",
	"s3Uploader":        "upload to S3",
	"flowStreamService": "the gRPC FlowStreamService (the HTTP stream /flows/stream serves the same purpose)",
	"recordContents":    "",
	"clusterID":         "",
}

// ParseConfig reads a flow-aggregator.conf: defaults for what it omits; an
// unknown key, or a value that cannot be used, is an error naming the key.
func ParseConfig(name string, data []byte) (Config, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	var errs []error
	for k, v := range raw {
		what, ok := upstreamNotBuilt[k]
		if !ok {
			continue
		}
		if m, isMap := v.(map[string]any); isMap && m["enable"] == true {
			errs = append(errs, fmt.Errorf("%s: %s.enable: %s is not built in this Antrea", name, k, what))
		}
		delete(raw, k)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	cleaned, err := yaml.Marshal(raw)
	if err != nil {
		return Config{}, err
	}
	c := DefaultConfig()
	if err := yaml.UnmarshalStrict(cleaned, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %s", name, unknownKeyMessage(err))
	}
	if errs := c.validate(); len(errs) > 0 {
		for i := range errs {
			errs[i] = fmt.Errorf("%s: %w", name, errs[i])
		}
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// unknownKeyMessage turns the decoder's `json: unknown field "x"` into
// "unknown key x".
func unknownKeyMessage(err error) string {
	s := err.Error()
	if i := strings.Index(s, `unknown field "`); i >= 0 {
		rest := s[i+len(`unknown field "`):]
		if j := strings.Index(rest, `"`); j >= 0 {
			return fmt.Sprintf("unknown key %q (known: %s)", rest[:j], strings.Join(knownKeys(), ", "))
		}
	}
	return s
}

func knownKeys() []string {
	keys := []string{"mode", "activeFlowRecordTimeout", "inactiveFlowRecordTimeout", "aggregatorTransportProtocol",
		"flowAggregatorAddress", "correlationWait", "apiServer", "flowCollector", "flowLogger", "recordBufferSize"}
	sort.Strings(keys)
	return keys
}

// LoadConfig reads the file at path.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(path, b)
}

func (c Config) validate() []error {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Mode != "Aggregate" {
		fail("mode", "%q: want Aggregate (upstream's Proxy is not built)", c.Mode)
	}
	for _, d := range []struct{ key, v string }{{"activeFlowRecordTimeout", c.ActiveFlowRecordTimeout},
		{"inactiveFlowRecordTimeout", c.InactiveFlowRecordTimeout}, {"correlationWait", c.CorrelationWait},
		{"flowCollector.templateRefreshTimeout", c.FlowCollector.TemplateRefreshTimeout}} {
		if v, err := time.ParseDuration(d.v); err != nil || v < time.Second {
			fail(d.key, "%q is not a duration of at least 1s (e.g. 10s)", d.v)
		}
	}
	switch c.AggregatorTransportProtocol {
	case "tcp", "udp", "tls", "none":
	default:
		fail("aggregatorTransportProtocol", "%q: want tcp, udp, tls or none", c.AggregatorTransportProtocol)
	}
	if c.APIServer.APIPort < 1 || c.APIServer.APIPort > 65535 {
		fail("apiServer.apiPort", "%d is not a port (1 to 65535)", c.APIServer.APIPort)
	}
	if c.RecordBufferSize < 1 || c.RecordBufferSize > 1<<22 {
		fail("recordBufferSize", "%d: want 1 to %d", c.RecordBufferSize, 1<<22)
	}
	fc := c.FlowCollector
	if fc.Enable {
		if _, _, err := ParseCollectorAddress(fc.Address); err != nil {
			fail("flowCollector.address", "%v", err)
		}
		if fc.RecordFormat != "IPFIX" {
			fail("flowCollector.recordFormat", "%q: want IPFIX (upstream's JSON is not built; flowLogger writes JSON)", fc.RecordFormat)
		}
	}
	if fc.MaxIPFIXMsgSize != 0 && (fc.MaxIPFIXMsgSize < 512 || fc.MaxIPFIXMsgSize > 65535) {
		fail("flowCollector.maxIPFIXMsgSize", "%d: want 0 (the transport's default) or 512 to 65535", fc.MaxIPFIXMsgSize)
	}
	fl := c.FlowLogger
	if fl.Enable {
		if fl.Path == "" {
			fail("flowLogger.path", "empty: want the log file's path")
		}
		if fl.RecordFormat != "JSON" {
			fail("flowLogger.recordFormat", "%q: want JSON (upstream's CSV is not built)", fl.RecordFormat)
		}
		if fl.MaxSize < 1 {
			fail("flowLogger.maxSize", "%d: want at least 1 (MB)", fl.MaxSize)
		}
		if fl.MaxBackups < 0 {
			fail("flowLogger.maxBackups", "%d: want 0 or more", fl.MaxBackups)
		}
	}
	return errs
}

// ParseCollectorAddress parses flowCollector.address, HOST:PORT[:PROTO]
// (an IPv6 HOST in brackets), PROTO tcp (the default) or udp.
func ParseCollectorAddress(s string) (hostPort, proto string, err error) {
	proto = "tcp"
	hp := s
	for _, p := range []string{"tcp", "udp"} {
		if strings.HasSuffix(s, ":"+p) {
			hp, proto = strings.TrimSuffix(s, ":"+p), p
		}
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", "", fmt.Errorf("%q: want HOST:PORT[:tcp|udp]: %v", s, err)
	}
	if host == "" {
		return "", "", fmt.Errorf("%q has no host", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("%q: %q is not a port (1 to 65535)", s, port)
	}
	return hp, proto, nil
}

// durations parsed (validate checked them).
func (c Config) correlationWait() time.Duration {
	d, _ := time.ParseDuration(c.CorrelationWait)
	return d
}
func (c Config) activeTimeout() time.Duration {
	d, _ := time.ParseDuration(c.ActiveFlowRecordTimeout)
	return d
}
func (c Config) inactiveTimeout() time.Duration {
	d, _ := time.ParseDuration(c.InactiveFlowRecordTimeout)
	return d
}
func (c Config) templateRefresh() time.Duration {
	d, _ := time.ParseDuration(c.FlowCollector.TemplateRefreshTimeout)
	return d
}

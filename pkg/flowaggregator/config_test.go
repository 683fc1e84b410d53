package flowaggregator

import (
	"strings"
	"testing"
)

func TestAnEmptyConfigIsTheDefaults(t *testing.T) {
	c, err := ParseConfig(ConfigFileName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c != DefaultConfig() {
		t.Errorf("%+v, want the defaults %+v", c, DefaultConfig())
	}
}

func TestUpstreamsDisabledSectionsAreAccepted(t *testing.T) {
	conf := `
mode: Aggregate
activeFlowRecordTimeout: 60s
inactiveFlowRecordTimeout: 90s
aggregatorTransportProtocol: "tcp"
flowAggregatorAddress: ""
recordContents:
  podLabels: false
apiServer:
  apiPort: 10348
flowCollector:
  enable: true
  address: "192.0.2.1:4739:udp"
  recordFormat: "IPFIX"
  templateRefreshTimeout: "600s"
  maxIPFIXMsgSize: 0
clickHouse:
  enable: false
  databaseURL: "tcp://clickhouse-clickhouse.flow-visibility.svc:9000"
s3Uploader:
  enable: false
flowLogger:
  enable: true
  path: "/tmp/antrea-flows.log"
  maxSize: 100
  maxBackups: 3
  recordFormat: "JSON"
recordBufferSize: 8192
`
	c, err := ParseConfig(ConfigFileName, []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	if addr, proto, _ := ParseCollectorAddress(c.FlowCollector.Address); addr != "192.0.2.1:4739" || proto != "udp" {
		t.Errorf("collector %s %s, want 192.0.2.1:4739 udp", addr, proto)
	}
}

func TestBadConfigIsRefusedNamingTheKey(t *testing.T) {
	for conf, want := range map[string]string{
		"flowCollecter:\n  enable: true\n":                                           `unknown key "flowCollecter"`,
		"flowCollector:\n  adress: x\n":                                              `unknown key "adress"`,
		"mode: Proxy\n":                                                              "mode: \"Proxy\"",
		"aggregatorTransportProtocol: sctp\n":                                        "aggregatorTransportProtocol: \"sctp\"",
		"correlationWait: 0s\n":                                                      "correlationWait: \"0s\"",
		"activeFlowRecordTimeout: soon\n":                                            "activeFlowRecordTimeout: \"soon\"",
		"flowCollector:\n  enable: true\n  address: \"10.0.0.1\"\n":                  "flowCollector.address",
		"flowCollector:\n  enable: true\n  address: \"10.0.0.1:4739:sctp\"\n":        "flowCollector.address",
		"flowCollector:\n  enable: true\n  address: \"10.0.0.1:99999\"\n":            "flowCollector.address",
		"flowCollector:\n  enable: true\n  address: \"a:1\"\n  recordFormat: JSON\n": "flowCollector.recordFormat",
		"flowCollector:\n  maxIPFIXMsgSize: 100\n":                                   "flowCollector.maxIPFIXMsgSize",
		"flowLogger:\n  enable: true\n  recordFormat: CSV\n":                         "flowLogger.recordFormat",
		"flowLogger:\n  enable: true\n  path: \"\"\n":                                "flowLogger.path",
		"apiServer:\n  apiPort: 0\n":                                                 "apiServer.apiPort",
		"recordBufferSize: 0\n":                                                      "recordBufferSize",
		"clickHouse:\n  enable: true\n":                                              "clickHouse.enable: export to ClickHouse is not built",
	} {
		_, err := ParseConfig(ConfigFileName, []byte(conf))
		if err == nil {
			t.Errorf("%q was accepted, want an error naming %s", conf, want)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), ConfigFileName+": ") {
			t.Errorf("%q: error %q, want it to name the file and %s", conf, err, want)
		}
	}
}

package lab

import (
	"strings"
	"testing"
)

// TestEncryptionOption: --encryption sets the agents' trafficEncryptionMode
// in the manifest's overlay, in upstream's spelling; what it cannot run is
// refused naming the flag.
func TestEncryptionOption(t *testing.T) {
	for _, tc := range []struct {
		name, flag, wantMode, wantErr string
		kubelet                       Kubelet
	}{
		{"none is the default", "", "none", "", KubeletReal},
		{"wireguard in any case", "WireGuard", "wireGuard", "", KubeletReal},
		{"wireguard needs real nodes", "wireguard", "", "--encryption wireguard needs --runtime antrea and --kubelet real", KubeletSim},
		{"ipsec is refused with the reason", "ipsec", "", "no ESP", KubeletReal},
		{"a made-up mode", "tls", "", "--encryption must be none or wireguard", KubeletReal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Encryption, o.Kubelet = tc.flag, tc.kubelet
			err := o.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got := o.labConfOverlay()["antrea-agent.conf"]["trafficEncryptionMode"]; got != tc.wantMode {
				t.Errorf("trafficEncryptionMode %q, want %q", got, tc.wantMode)
			}
		})
	}
}

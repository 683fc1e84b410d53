package wireguard

import (
	"compress/gzip"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func writeGzip(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gzip.NewWriter(f)
	if _, err := w.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTheKeyIsMadeOnceWith0600AndKeptAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wireguard", "private.key")
	k1, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first start: created=%t err=%v, want a new key", created, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Errorf("key directory mode %v, want 0700", dst.Mode().Perm())
	}
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created || k2 != k1 {
		t.Fatalf("restart: created=%t err=%v same=%t, want the same key read back", created, err, k2 == k1)
	}
	// `wg pubkey` reads the same text: base64 of 32 bytes.
	data, _ := os.ReadFile(path)
	if parsed, err := wgtypes.ParseKey(strings.TrimSpace(string(data))); err != nil || parsed != k1 {
		t.Errorf("file holds %q, not the key in wg's base64 form (%v)", data, err)
	}
	// Rotation on request: delete the file, restart.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	k3, created, err := LoadOrCreateKey(path)
	if err != nil || !created || k3 == k1 {
		t.Fatalf("after deleting the file: created=%t err=%v, want a new, different key", created, err)
	}
}

func TestAKeyFileReadableByOthersIsMade0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "private.key")
	k, _ := wgtypes.GeneratePrivateKey()
	if err := os.WriteFile(path, []byte(k.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, created, err := LoadOrCreateKey(path)
	if err != nil || created || got != k {
		t.Fatalf("created=%t err=%v, want the file's key", created, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
}

func TestAKeyFileThatHoldsNoKeyIsRefusedNamingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "private.key")
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := LoadOrCreateKey(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("err %v, want a refusal naming %s and how to make a new key", err, path)
	}
	if data, _ := os.ReadFile(path); string(data) != "not a key\n" {
		t.Errorf("the file was replaced: %q", data)
	}
}

// The UAPI text round-trips through wireguard-go's own parser in the netns
// test; here its form is checked against the protocol's documented keys
// (https://www.wireguard.com/xplatform/).
func TestUAPISetSpellsPeersAsTheProtocolDocumentsThem(t *testing.T) {
	priv, _ := wgtypes.GeneratePrivateKey()
	peer, _ := wgtypes.GeneratePrivateKey()
	old, _ := wgtypes.GeneratePrivateKey()
	port := 51820
	_, cidr, _ := net.ParseCIDR("10.10.2.0/24")
	got := uapiSet(wgtypes.Config{PrivateKey: &priv, ListenPort: &port, Peers: []wgtypes.PeerConfig{
		{PublicKey: old.PublicKey(), Remove: true},
		{PublicKey: peer.PublicKey(), Endpoint: &net.UDPAddr{IP: net.ParseIP("172.30.0.12"), Port: 51820},
			ReplaceAllowedIPs: true, AllowedIPs: []net.IPNet{*cidr}},
	}})
	hexOf := func(k wgtypes.Key) string { return hexString(k[:]) }
	want := "private_key=" + hexOf(priv) + "\nlisten_port=51820\n" +
		"public_key=" + hexOf(old.PublicKey()) + "\nremove=true\n" +
		"public_key=" + hexOf(peer.PublicKey()) + "\nendpoint=172.30.0.12:51820\nreplace_allowed_ips=true\nallowed_ip=10.10.2.0/24\n"
	if got != want {
		t.Errorf("uapiSet:\n%s\nwant:\n%s", got, want)
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&0xf])
	}
	return string(out)
}

func TestUAPIGetPeersAreRead(t *testing.T) {
	peer, _ := wgtypes.GeneratePrivateKey()
	pub := peer.PublicKey()
	text := "private_key=" + hexString(make([]byte, 32)) + "\nlisten_port=51820\n" +
		"public_key=" + hexString(pub[:]) + "\nendpoint=172.30.0.12:51820\n" +
		"last_handshake_time_sec=1700000000\nlast_handshake_time_nsec=5\ntx_bytes=1200\nrx_bytes=800\n" +
		"persistent_keepalive_interval=0\nallowed_ip=10.10.2.0/24\nprotocol_version=1\n"
	peers, err := parseUAPIPeers(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 1 {
		t.Fatalf("peers %+v, want one", peers)
	}
	p := peers[0]
	if p.PublicKey != peer.PublicKey() || p.Endpoint.String() != "172.30.0.12:51820" || p.TransmitBytes != 1200 ||
		p.ReceiveBytes != 800 || len(p.AllowedIPs) != 1 || p.AllowedIPs[0].String() != "10.10.2.0/24" ||
		!p.LastHandshakeTime.Equal(time.Unix(1700000000, 5)) {
		t.Errorf("peer %+v", p)
	}
}

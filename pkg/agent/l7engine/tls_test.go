package l7engine

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"
)

// clientHello is the first flight crypto/tls sends as a client for
// serverName (none when empty).
func clientHello(t *testing.T, serverName string, maxVersion uint16) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		cl := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == "", MaxVersion: maxVersion})
		_ = cl.Handshake()
		cl.Close()
	}()
	var out []byte
	buf := make([]byte, 1<<16)
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		n, err := s.Read(buf)
		out = append(out, buf[:n]...)
		if _, _, complete, _ := clientHelloSNI(out); complete || err == io.EOF || err != nil {
			break
		}
	}
	c.Close()
	return out
}

func TestClientHelloSNIReadsWhatCryptoTLSSends(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sni     string
		version uint16
	}{
		{"TLS 1.3 with a server name", "api.bar.com", tls.VersionTLS13},
		{"TLS 1.2 with a server name", "www.example.test", tls.VersionTLS12},
		{"no server name", "", tls.VersionTLS13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hello := clientHello(t, tc.sni, tc.version)
			sni, n, complete, err := clientHelloSNI(hello)
			if err != nil || !complete {
				t.Fatalf("complete %v, err %v", complete, err)
			}
			if sni != tc.sni || n != len(hello) {
				t.Fatalf("sni %q n %d, want %q %d", sni, n, tc.sni, len(hello))
			}
			// Every prefix is incomplete, never an error.
			for i := 0; i < len(hello); i++ {
				if _, _, complete, err := clientHelloSNI(hello[:i]); complete || err != nil {
					t.Fatalf("prefix of %d bytes: complete %v, err %v", i, complete, err)
				}
			}
		})
	}
}

func TestClientHelloSNIRefusesWhatIsNotTLS(t *testing.T) {
	for name, b := range map[string][]byte{
		"HTTP":                  []byte("GET / HTTP/1.1\r\n\r\n"),
		"an application record": {0x17, 3, 3, 0, 1, 0},
		"a ServerHello":         {0x16, 3, 3, 0, 4, 2, 0, 0, 0},
	} {
		if _, _, _, err := clientHelloSNI(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

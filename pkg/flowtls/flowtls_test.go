package flowtls

import (
	"crypto/tls"
	"testing"
	"time"
)

// handshake connects with client to a loopback server of server, writes
// and reads a byte back, and returns the first error either side saw.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil {
			done <- err
			return
		}
		_, err = c.Write(b)
		done <- err
	}()
	c, err := tls.Dial("tcp", l.Addr().String(), client)
	if err != nil {
		<-done
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{1}); err != nil {
		<-done
		return err
	}
	_, cerr := c.Read(make([]byte, 1))
	if serr := <-done; serr != nil {
		return serr
	}
	return cerr
}

// The agents' configuration (the CA, the client certificate) is accepted by
// the aggregator's, for each of the Service's names and the extra one;
// another name, another CA or no client certificate is refused.
func TestTheAgentsAndTheAggregatorTrustEachOther(t *testing.T) {
	names := append(ServiceNames("flow-aggregator", "flow-aggregator"), "10.0.0.7")
	p, err := New(names)
	if err != nil {
		t.Fatal(err)
	}
	server, err := p.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ServerName("flow-aggregator", "flow-aggregator"), "flow-aggregator.flow-aggregator", "10.0.0.7"} {
		c, err := ClientConfig(p.CACert, p.ClientCert, p.Client, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := handshake(t, server, c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	other, err := New([]string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]*tls.Config{}
	bad["another name"], _ = ClientConfig(p.CACert, p.ClientCert, p.Client, "elsewhere.example")
	bad["another CA"], _ = ClientConfig(other.CACert, p.ClientCert, p.Client, ServerName("flow-aggregator", "flow-aggregator"))
	bad["another CA's client certificate"], _ = ClientConfig(p.CACert, other.ClientCert, other.Client, ServerName("flow-aggregator", "flow-aggregator"))
	noCert, _ := ClientConfig(p.CACert, p.ClientCert, p.Client, ServerName("flow-aggregator", "flow-aggregator"))
	noCert.Certificates = nil
	bad["no client certificate"] = noCert
	for what, c := range bad {
		if err := handshake(t, server, c); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
	if _, err := ClientConfig([]byte("not a certificate"), p.ClientCert, p.Client, "x"); err == nil {
		t.Error("a ConfigMap without a CA certificate was accepted")
	}
}

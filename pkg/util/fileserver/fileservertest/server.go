// Package fileservertest runs an SFTP server in the test's process on
// loopback: the process boundary's fake of the file servers users name in
// PacketCapture and SupportBundleCollection. The e2e tests upload to the
// real thing, OpenSSH's internal-sftp on the lab's outside host.
package fileservertest

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"antrea.io/antrea/pkg/util/fileserver"
)

// User and Password are the only credentials the server accepts.
const (
	User     = "antrea"
	Password = "s3cret-Pa55"
)

// Server is a running SFTP server serving Dir.
type Server struct {
	Addr    string
	Dir     string
	HostKey ssh.PublicKey
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PasswordCallback: func(c ssh.ConnMetadata, pass []byte) (*ssh.Permissions, error) {
		if c.User() == User && string(pass) == Password {
			return nil, nil
		}
		return nil, errors.New("refused")
	}}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				serve(conn, cfg, dir)
			}()
		}
	}()
	return &Server{Addr: ln.Addr().String(), Dir: dir, HostKey: signer.PublicKey()}
}

func serve(conn net.Conn, cfg *ssh.ServerConfig, dir string) {
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		ch, in, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			for r := range in {
				_ = r.Reply(r.Type == "subsystem" && len(r.Payload) > 4 && string(r.Payload[4:]) == "sftp", nil)
			}
		}()
		srv, err := sftp.NewServer(ch, sftp.WithServerWorkingDirectory(dir))
		if err != nil {
			return
		}
		_ = srv.Serve()
		srv.Close()
	}
}

// URL is the server's sftp:// URL of its directory.
func (s *Server) URL() string { return "sftp://" + s.Addr + s.Dir }

// Server is what fileserver.Upload needs to log in with password.
func (s *Server) Server(password string) fileserver.Server {
	return fileserver.Server{URL: s.URL(), HostPublicKey: s.HostKey.Marshal(), Username: User, Password: password}
}

// Files lists the names in the server's directory.
func (s *Server) Files(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

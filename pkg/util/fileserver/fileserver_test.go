package fileserver

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sftpServer is an SFTP server in this process on loopback (the process
// boundary's fake; the lab's outside host runs OpenSSH's internal-sftp, which
// the e2e tests upload to), serving dir for the user "antrea".
type sftpServer struct {
	addr    string
	dir     string
	hostKey ssh.PublicKey
}

const testPassword = "s3cret-Pa55"

func startSFTPServer(t *testing.T) *sftpServer {
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
		if c.User() == "antrea" && string(pass) == testPassword {
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
							_ = r.Reply(r.Type == "subsystem" && string(r.Payload[4:]) == "sftp", nil)
						}
					}()
					srv, err := sftp.NewServer(ch, sftp.WithServerWorkingDirectory(dir))
					if err != nil {
						return
					}
					_ = srv.Serve()
					srv.Close()
				}
			}()
		}
	}()
	return &sftpServer{addr: ln.Addr().String(), dir: dir, hostKey: signer.PublicKey()}
}

func (s *sftpServer) server(password string) Server {
	return Server{URL: "sftp://" + s.addr + "/" + s.dir, HostPublicKey: s.hostKey.Marshal(), Username: "antrea", Password: password}
}

func (s *sftpServer) files(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestUploadWritesTheFileUnderItsName(t *testing.T) {
	s := startSFTPServer(t)
	content := bytes.Repeat([]byte("pcapng"), 100000)
	if err := Upload(context.Background(), s.server(testPassword), "cap.pcapng", bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(s.dir, "cap.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("uploaded %d bytes, the server has %d", len(content), len(got))
	}
	// A second upload of the same name replaces it.
	if err := Upload(context.Background(), s.server(testPassword), "cap.pcapng", strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(s.dir, "cap.pcapng")); string(got) != "new" {
		t.Fatalf("after the second upload the file holds %q", got)
	}
	if names := s.files(t); len(names) != 1 {
		t.Fatalf("the directory holds %v, want only cap.pcapng", names)
	}
}

func TestAWrongPasswordIsAnAuthenticationErrorWithoutThePassword(t *testing.T) {
	s := startSFTPServer(t)
	wrong := "not-the-" + testPassword
	err := Upload(context.Background(), s.server(wrong), "cap.pcapng", strings.NewReader("x"))
	if !errors.Is(err, ErrAuthentication) {
		t.Fatalf("err = %v, want ErrAuthentication", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), testPassword) {
		t.Fatalf("the error shows a password: %v", err)
	}
	if names := s.files(t); len(names) != 0 {
		t.Fatalf("a refused upload left %v", names)
	}
}

func TestAnotherHostKeyIsRefused(t *testing.T) {
	s := startSFTPServer(t)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	pub, err := ssh.NewPublicKey(other)
	if err != nil {
		t.Fatal(err)
	}
	srv := s.server(testPassword)
	srv.HostPublicKey = pub.Marshal()
	if err := Upload(context.Background(), srv, "cap.pcapng", strings.NewReader("x")); !errors.Is(err, ErrHostKey) {
		t.Fatalf("err = %v, want ErrHostKey", err)
	}
	if names := s.files(t); len(names) != 0 {
		t.Fatalf("a refused upload left %v", names)
	}
}

// blockingReader yields some bytes, then blocks until released.
type blockingReader struct {
	sent    bool
	release chan struct{}
	reading chan struct{}
}

func (r *blockingReader) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		return copy(p, bytes.Repeat([]byte("a"), 4096)), nil
	}
	close(r.reading)
	<-r.release
	return 0, io.ErrUnexpectedEOF
}

func TestAnUploadThatFailsMidwayLeavesNoFile(t *testing.T) {
	s := startSFTPServer(t)
	r := &blockingReader{release: make(chan struct{}), reading: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Upload(ctx, s.server(testPassword), "bundle.tar.gz", r) }()
	<-r.reading
	close(r.release) // the content ends with an error
	if err := <-done; err == nil {
		t.Fatal("an upload whose content failed returned no error")
	}
	if names := s.files(t); len(names) != 0 {
		t.Fatalf("a failed upload left %v", names)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ url, addr, dir, err string }{
		{url: "sftp://10.0.0.1:22/upload", addr: "10.0.0.1:22", dir: "/upload"},
		{url: "sftp://[fd00::1]:2222", addr: "[fd00::1]:2222", dir: "."},
		{url: "http://10.0.0.1:22/upload", err: `scheme "http" is not supported`},
		{url: "sftp://10.0.0.1/upload", err: "want sftp://host:port"},
		{url: "sftp://user:pw@10.0.0.1:22/x", err: "credentials belong in the Secret"},
	} {
		addr, dir, err := ParseURL(tc.url)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q) err = %v, want %q", tc.url, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), ":pw@") {
				t.Errorf("ParseURL(%q) shows the password: %v", tc.url, err)
			}
			continue
		}
		if err != nil || addr != tc.addr || dir != tc.dir {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tc.url, addr, dir, err, tc.addr, tc.dir)
		}
	}
}

func TestServerFromSecret(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "auth", Namespace: "kube-system"},
		Data: map[string][]byte{"username": []byte("antrea"), "password": []byte(testPassword)}}
	s, err := ServerFromSecret("sftp://h:22/x", nil, sec)
	if err != nil || s.Username != "antrea" || s.Password != testPassword {
		t.Fatalf("ServerFromSecret = %+v, %v", s, err)
	}
	delete(sec.Data, "password")
	if _, err := ServerFromSecret("sftp://h:22/x", nil, sec); err == nil || !strings.Contains(err.Error(), `"password"`) {
		t.Fatalf("a Secret without a password: err = %v", err)
	}
}

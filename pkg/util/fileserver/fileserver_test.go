package fileserver_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/util/fileserver"
	"antrea.io/antrea/pkg/util/fileserver/fileservertest"
)

func TestUploadWritesTheFileUnderItsName(t *testing.T) {
	s := fileservertest.Start(t)
	content := bytes.Repeat([]byte("pcapng"), 100000)
	if err := fileserver.Upload(context.Background(), s.Server(fileservertest.Password), "cap.pcapng", bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(s.Dir, "cap.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("uploaded %d bytes, the server has %d", len(content), len(got))
	}
	// A second upload of the same name replaces it.
	if err := fileserver.Upload(context.Background(), s.Server(fileservertest.Password), "cap.pcapng", strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(s.Dir, "cap.pcapng")); string(got) != "new" {
		t.Fatalf("after the second upload the file holds %q", got)
	}
	if names := s.Files(t); len(names) != 1 {
		t.Fatalf("the directory holds %v, want only cap.pcapng", names)
	}
}

func TestAWrongPasswordIsAnAuthenticationErrorWithoutThePassword(t *testing.T) {
	s := fileservertest.Start(t)
	wrong := "not-the-" + fileservertest.Password
	err := fileserver.Upload(context.Background(), s.Server(wrong), "cap.pcapng", strings.NewReader("x"))
	if !errors.Is(err, fileserver.ErrAuthentication) {
		t.Fatalf("err = %v, want ErrAuthentication", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), fileservertest.Password) {
		t.Fatalf("the error shows a password: %v", err)
	}
	if names := s.Files(t); len(names) != 0 {
		t.Fatalf("a refused upload left %v", names)
	}
}

func TestAnotherHostKeyIsRefused(t *testing.T) {
	s := fileservertest.Start(t)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	pub, err := ssh.NewPublicKey(other)
	if err != nil {
		t.Fatal(err)
	}
	srv := s.Server(fileservertest.Password)
	srv.HostPublicKey = pub.Marshal()
	if err := fileserver.Upload(context.Background(), srv, "cap.pcapng", strings.NewReader("x")); !errors.Is(err, fileserver.ErrHostKey) {
		t.Fatalf("err = %v, want ErrHostKey", err)
	}
	if names := s.Files(t); len(names) != 0 {
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
	s := fileservertest.Start(t)
	r := &blockingReader{release: make(chan struct{}), reading: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fileserver.Upload(ctx, s.Server(fileservertest.Password), "bundle.tar.gz", r) }()
	<-r.reading
	close(r.release) // the content ends with an error
	if err := <-done; err == nil {
		t.Fatal("an upload whose content failed returned no error")
	}
	if names := s.Files(t); len(names) != 0 {
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
		addr, dir, err := fileserver.ParseURL(tc.url)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("fileserver.ParseURL(%q) err = %v, want %q", tc.url, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), ":pw@") {
				t.Errorf("fileserver.ParseURL(%q) shows the password: %v", tc.url, err)
			}
			continue
		}
		if err != nil || addr != tc.addr || dir != tc.dir {
			t.Errorf("fileserver.ParseURL(%q) = %q, %q, %v; want %q, %q", tc.url, addr, dir, err, tc.addr, tc.dir)
		}
	}
}

func TestServerFromSecret(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "auth", Namespace: "kube-system"},
		Data: map[string][]byte{"username": []byte("antrea"), "password": []byte(fileservertest.Password)}}
	s, err := fileserver.ServerFromSecret("sftp://h:22/x", nil, sec)
	if err != nil || s.Username != "antrea" || s.Password != fileservertest.Password {
		t.Fatalf("ServerFromSecret = %+v, %v", s, err)
	}
	delete(sec.Data, "password")
	if _, err := fileserver.ServerFromSecret("sftp://h:22/x", nil, sec); err == nil || !strings.Contains(err.Error(), `"password"`) {
		t.Fatalf("a Secret without a password: err = %v", err)
	}
}

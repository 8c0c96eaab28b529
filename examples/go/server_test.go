package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// timeout bounds every wait in these tests.
const timeout = 20 * time.Second

// The servers, built once by TestMain: the stdlib one (this package) and
// the go-systemd one (./go-systemd, a module of its own).
var serverBin, goSystemdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "prebind-example-go-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "server")
	goSystemdBin = filepath.Join(dir, "go-systemd-server")
	for _, b := range []struct{ out, src string }{{serverBin, "."}, {goSystemdBin, "./go-systemd"}} {
		build := exec.Command(goTool(), "build", "-o", b.out, ".")
		build.Dir = b.src
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", b.src, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goTool is the go command that runs this test.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// Published is what prebind --format=json writes.
type Published struct {
	Pid      int `json:"pid"`
	ChildPid int `json:"child_pid"`
	Sockets  []struct {
		Fd   int    `json:"fd"`
		Name string `json:"name"`
		Port int    `json:"port"`
		URL  string `json:"url"`
	} `json:"sockets"`
}

// Server is a server running under prebind.
type Server struct {
	Published
	URL string // of the first socket
	cmd *exec.Cmd
}

func prebindPath(t testing.TB) string {
	if p := os.Getenv("PREBIND"); p != "" {
		return p
	}
	p, err := exec.LookPath("prebind")
	if err != nil {
		t.Fatal("prebind not found: set PREBIND or put prebind on PATH")
	}
	return p
}

// StartServer runs command through prebind and returns once the socket
// listens: the address comes from a pipe given with --port-fd, which the
// server never sees, so EOF arrives as soon as prebind has published. The
// server is stopped with SIGTERM (forwarded by prebind) when the test ends,
// and must exit 0.
func StartServer(t testing.TB, prebindArgs []string, command ...string) *Server {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// ExtraFiles[0] is fd 3 in prebind; prebind puts the socket at 3 for
	// the server, and never passes the --port-fd descriptor on.
	args := append([]string{"--port-fd=3", "--format=json"}, prebindArgs...)
	args = append(append(args, "--"), command...)
	cmd := exec.Command(prebindPath(t), args...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatal(err)
	}
	w.Close() // only prebind holds the write end now

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { stopServer(t, cmd, exited) })

	r.SetReadDeadline(time.Now().Add(timeout))
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading prebind's address: %v", err)
	}
	if len(data) == 0 {
		select {
		case err := <-exited:
			exited <- err // for stopServer
			t.Fatalf("prebind published nothing: %v", err)
		case <-time.After(timeout):
			t.Fatal("prebind published nothing and did not exit")
		}
	}
	s := &Server{cmd: cmd}
	if err := json.Unmarshal(data, &s.Published); err != nil || len(s.Sockets) == 0 {
		t.Fatalf("bad json from prebind %q: %v", data, err)
	}
	s.URL = s.Sockets[0].URL
	return s
}

func stopServer(t testing.TB, cmd *exec.Cmd, exited chan error) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("server under prebind: %v", err)
		}
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-exited
		t.Errorf("server did not stop within %v of SIGTERM", timeout)
	}
}

func get(t testing.TB, url string) string {
	t.Helper()
	client := http.Client{Timeout: timeout}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %q %v", url, resp.StatusCode, body, err)
	}
	return string(body)
}

func TestServerThroughPrebind(t *testing.T) {
	t.Parallel()
	s := StartServer(t, nil, serverBin)
	// No waiting loop: the socket listens already, the kernel queues us.
	body := get(t, s.URL+"/hello")
	if want := fmt.Sprintf("go pid=%d path=/hello\n", s.ChildPid); body != want {
		t.Fatalf("got %q, want %q", body, want)
	}
}

func TestNamedSocket(t *testing.T) {
	t.Parallel()
	s := StartServer(t, []string{"-l", "web=0"}, serverBin)
	if s.Sockets[0].Name != "web" || !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("unexpected sockets %+v", s.Sockets)
	}
	get(t, s.URL)
}

func TestManyServersInParallel(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ports := map[int]bool{}
	for i := 0; i < 8; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			s := StartServer(t, nil, serverBin)
			mu.Lock()
			if ports[s.Sockets[0].Port] {
				t.Errorf("port %d handed out twice", s.Sockets[0].Port)
			}
			ports[s.Sockets[0].Port] = true
			mu.Unlock()
			if body := get(t, s.URL); !strings.HasPrefix(body, fmt.Sprintf("go pid=%d ", s.ChildPid)) {
				t.Errorf("answer from another server: %q", body)
			}
		})
	}
}

func TestGoSystemdActivation(t *testing.T) {
	t.Parallel()
	// go-systemd checks LISTEN_PID and maps LISTEN_FDNAMES to listeners.
	s := StartServer(t, []string{"-l", "web=0"}, goSystemdBin)
	if body := get(t, s.URL+"/x"); body != fmt.Sprintf("go-systemd pid=%d path=/x\n", s.ChildPid) {
		t.Fatalf("unexpected answer %q", body)
	}
}

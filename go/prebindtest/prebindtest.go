// Package prebindtest runs a server under prebind for a Go test. One call
// gives a server that listens already, and its URL, as
// httptest.NewServer does; the test's Cleanup stops it:
//
//	srv := prebindtest.Start(t, []string{bin, "-config", "test.toml"})
//	resp, err := http.Get(srv.URL + "/health")
//
// prebind binds a free port first and passes the listening socket to the
// server as fd 3 (the systemd protocol: package prebind has the server's
// side, and Intercept serves a server that binds its own port). So there
// is no free-port search and no polling, and tests in parallel never
// collide. If prebind fails to start the server, the test fails at once
// with prebind's reason, its exit status and the last lines of output.
//
// Start finds prebind on PATH, or in $PREBIND.
package prebindtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Socket is one socket as prebind published it.
type Socket struct {
	Fd      int    `json:"fd"`      // the server's fd: 3, 4, ...
	Name    string `json:"name"`    // in LISTEN_FDNAMES ("unknown" if unnamed)
	Family  string `json:"family"`  // ipv4, ipv6 or unix
	Type    string `json:"type"`    // stream or dgram
	Address string `json:"address"` // bound host, or the unix path
	Port    int    `json:"port"`    // 0 for a unix socket
	URL     string `json:"url"`     // http://127.0.0.1:41234, udp://..., unix:/path
}

// Host is the host to connect to (127.0.0.1 for a socket bound to *), or
// the unix path.
func (s Socket) Host() string {
	if s.Family == "unix" {
		return s.Address
	}
	hostport := s.URL[strings.Index(s.URL, "://")+3:]
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return s.Address
	}
	return host
}

// A Server is a server running under prebind.
type Server struct {
	URL        string   // the first socket's URL: http://127.0.0.1:41234
	Host       string   // the first socket's host, to connect to
	Port       int      // the first socket's port
	Ports      []int    // every socket's port, in fd order
	Sockets    []Socket // every socket, in fd order
	Pid        int      // the server's pid (COMMAND's)
	PrebindPid int      // prebind's (the shared supervisor's, with Share)

	argv     []string
	cfg      *config
	cmd      *exec.Cmd
	exited   chan struct{} // closed once prebind has exited
	status   int           // prebind's exit status; -N: killed by signal N
	mu       sync.Mutex
	out      *os.File // prebind's and the server's output, unlinked
	final    string   // the output, once out is closed
	stopped  bool
	stopErr  error
	stopCode int
}

// Start runs argv (the server and its arguments) under prebind and
// returns once prebind has published the addresses: the sockets listen.
// The server is stopped (SIGTERM, then SIGKILL after StopTimeout) when
// the test and its subtests end; if it had exited on its own, the test
// fails then. If prebind publishes nothing, Start fails the test
// (t.Fatalf) with prebind's own message, its exit status and the last
// lines of output.
func Start(t testing.TB, argv []string, opts ...Option) *Server {
	t.Helper()
	s, err := start(argv, newConfig(opts), deadline(t))
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		t.Helper()
		if _, err := s.Stop(); err != nil {
			t.Errorf("%v", err)
		} else if t.Failed() {
			if tail := s.tail(); tail != "" {
				t.Logf("prebindtest: the last lines of %s's output:\n%s", shellJoin(argv), tail)
			}
		}
	})
	return s
}

// deadline is when the test binary panics (go test -timeout), if t knows:
// a start must fail with its reason before that.
func deadline(t testing.TB) time.Time {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if when, ok := d.Deadline(); ok {
			return when
		}
	}
	return time.Time{}
}

func start(argv []string, c *config, testDeadline time.Time) (*Server, error) {
	if c.err != nil {
		return nil, fmt.Errorf("prebindtest: %v", c.err)
	}
	if len(argv) == 0 {
		return nil, errors.New("prebindtest: Start: argv is empty: give the server and its arguments")
	}
	bin, err := findPrebind()
	if err != nil {
		return nil, err
	}
	wait := c.wait()
	if !testDeadline.IsZero() {
		if left := time.Until(testDeadline) - 2*time.Second; left < wait {
			wait = max64(left, time.Second)
			if c.waitsReady && wait > grace+time.Second {
				c.timeout = wait - grace // prebind gives up first, and says why
			}
		}
	}
	s := &Server{argv: append(append(append([]string{bin}, c.prebindArgs()...), "--"), argv...), cfg: c,
		exited: make(chan struct{})}
	r, err := s.spawn(c.dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	r.SetReadDeadline(time.Now().Add(wait))
	data, err := io.ReadAll(r)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, s.failed(fmt.Sprintf("prebind published nothing within %v", wait), false)
	case err != nil:
		return nil, s.failed(fmt.Sprintf("reading what prebind published: %v", err), false)
	case len(data) == 0:
		// Nothing is published for a command that cannot be run: 126/127.
		return nil, s.failed("prebind exited without publishing: the server did not start", true)
	}
	var published struct {
		Pid      int      `json:"pid"`
		ChildPid int      `json:"child_pid"`
		Sockets  []Socket `json:"sockets"`
	}
	if err := json.Unmarshal(data, &published); err != nil || len(published.Sockets) == 0 {
		return nil, s.failed(fmt.Sprintf("prebind published something that is not its JSON (%v): %.200q", err, data), false)
	}
	s.Sockets, s.Pid, s.PrebindPid = published.Sockets, published.ChildPid, published.Pid
	first := s.Sockets[0]
	s.URL, s.Host, s.Port = first.URL, first.Host(), first.Port
	for _, so := range s.Sockets {
		s.Ports = append(s.Ports, so.Port)
	}
	return s, nil
}

// spawn starts prebind with the write end of a pipe as fd 3 (--port-fd=3)
// and returns the read end: it reaches EOF once prebind has published and
// closed its copy, or has exited.
func (s *Server) spawn(dir string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("prebindtest: %v", err)
	}
	defer w.Close() // from now on only prebind holds it
	out, appender, err := outputFile()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("prebindtest: the output file: %v", err)
	}
	defer appender.Close()
	s.out = out
	s.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = appender, appender
	s.cmd.ExtraFiles = []*os.File{w} // fd 3 in prebind; never passed on to the server
	if err := startOnLockedThread(s.cmd); err != nil {
		r.Close()
		s.closeOutput()
		return nil, fmt.Errorf("prebindtest: running %s: %v", s.argv[0], err)
	}
	go func() {
		s.cmd.Wait()
		ws := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			s.status = -int(ws.Signal())
		} else {
			s.status = ws.ExitStatus()
		}
		close(s.exited)
	}()
	return r, nil
}

// outputFile is an unlinked temporary file for prebind's and the server's
// output: nothing is left behind even if the test binary is killed. The
// writers get it with O_APPEND, so that every write goes to its end; the
// tests read it with ReadAt.
func outputFile() (out, appender *os.File, err error) {
	out, err = os.CreateTemp("", "prebindtest-output-")
	if err != nil {
		return nil, nil, err
	}
	defer os.Remove(out.Name())
	appender, err = os.OpenFile(out.Name(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		out.Close()
		return nil, nil, err
	}
	return out, appender, nil
}

// failed stops what runs and returns the start's failure. exiting: prebind
// closed the pipe without a word, so it is exiting: its status is the
// reason, once it has come.
func (s *Server) failed(headline string, exiting bool) error {
	if exiting {
		select {
		case <-s.exited:
		case <-time.After(grace):
		}
	}
	var status *int
	if s.exitedOnItsOwn() {
		status = &s.status
	}
	s.terminate() // else our SIGTERM's status: it says nothing of the failure
	output := s.tail()
	s.closeOutput()
	return errors.New(failure(headline, s.argv, status, output))
}

func (s *Server) exitedOnItsOwn() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// terminate sends prebind SIGTERM, which it forwards to the server; prebind
// kills the server after --kill-after. If prebind itself is still there a
// little later, it is killed, and takes the server along (prebind(1), WHEN
// PREBIND DIES).
func (s *Server) terminate() {
	if s.exitedOnItsOwn() {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(s.cfg.stopTimeout + grace):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// Stop stops the server and returns prebind's exit status (the server's,
// 143 for a server that SIGTERM ended). With Share, it lets go of the
// shared server, which stops once nobody holds it. It returns an error,
// with prebind's message and the last lines of output, if the server had
// exited on its own. The test's Cleanup calls it; calling it again
// returns the same.
func (s *Server) Stop() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return s.stopCode, s.stopErr
	}
	s.stopped = true
	if !s.exitedOnItsOwn() && s.serverGone() {
		// prebind has yet to see it: its status is the server's, not
		// that of our SIGTERM.
		select {
		case <-s.exited:
		case <-time.After(grace): // --restart: it runs another one
		}
	}
	if s.exitedOnItsOwn() {
		s.stopErr = errors.New(failure("the server exited before it was stopped", s.argv, &s.status, s.tailLocked()))
	}
	s.terminate()
	// 124-127 are prebind's own failures, never a stop's: a command that
	// could not be run, for one, fails after prebind has published (it
	// publishes first), often as a request of the test meets the closed
	// socket and races our SIGTERM.
	if s.stopErr == nil && s.status >= 124 && s.status <= 127 {
		s.stopErr = errors.New(failure("prebind failed after it had published", s.argv, &s.status, s.tailLocked()))
	}
	s.closeOutputLocked()
	s.stopCode = s.status
	return s.stopCode, s.stopErr
}

// serverGone says whether the server has exited (a zombie that prebind
// has not reaped yet counts).
func (s *Server) serverGone() bool {
	if s.Pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(stat, ')') // the name in parentheses may hold anything
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// Output is what prebind and the server wrote to stdout and stderr so far.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outputLocked(0)
}

func (s *Server) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tailLocked()
}

// tailLocked is the last lines of the output, from its last 64 KiB: a
// chatty server's log is not read whole for an error message.
func (s *Server) tailLocked() string {
	text := s.outputLocked(tailBytes)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-tailLines):], "\n")
}

// outputLocked reads the output; last > 0: only its last bytes.
func (s *Server) outputLocked(last int64) string {
	if s.out == nil {
		if last > 0 && int64(len(s.final)) > last {
			return s.final[int64(len(s.final))-last:]
		}
		return s.final
	}
	var from int64
	if fi, err := s.out.Stat(); err == nil && last > 0 && fi.Size() > last {
		from = fi.Size() - last
	}
	data, _ := io.ReadAll(io.NewSectionReader(s.out, from, 1<<62))
	return string(data)
}

func (s *Server) closeOutput() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeOutputLocked()
}

func (s *Server) closeOutputLocked() {
	if s.out != nil {
		s.final = s.outputLocked(0)
		s.out.Close()
		s.out = nil
	}
}

// findPrebind is $PREBIND (a path, or a name on PATH), else prebind on PATH.
func findPrebind() (string, error) {
	name := os.Getenv("PREBIND")
	if name == "" {
		name = "prebind"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("prebindtest: prebind not found (%v): install the Debian package "+
			"(prebind_VERSION_ARCH.deb, README \"Install\"), or copy the static binary prebind-static "+
			"(one file, no dependency) onto PATH as prebind, or set PREBIND=/path/to/prebind", err)
	}
	return path, nil
}

func max64(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

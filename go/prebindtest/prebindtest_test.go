package prebindtest_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prebind/prebind/go/prebind"
	"github.com/prebind/prebind/go/prebindtest"
)

const timeout = 20 * time.Second

// The test binary is the server too: run with PREBINDTEST_SERVER=http it
// serves through prebind.Listener; =bind:PORT, it binds PORT itself (for
// Intercept).
func TestMain(m *testing.M) {
	if mode := os.Getenv("PREBINDTEST_SERVER"); mode != "" {
		serve(mode)
		return
	}
	os.Exit(m.Run())
}

func serve(mode string) {
	var ln net.Listener
	var err error
	if port := strings.TrimPrefix(mode, "bind:"); port != mode {
		ln, err = net.Listen("tcp", "127.0.0.1:"+port)
	} else {
		ln, err = prebind.Listener("127.0.0.1:0")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(3)
	}
	fmt.Println("server: serving")
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cwd, _ := os.Getwd()
		json.NewEncoder(w).Encode(map[string]any{"pid": os.Getpid(), "cwd": cwd,
			"greeting": os.Getenv("GREETING"), "listen_pid": os.Getenv("LISTEN_PID")})
	}))
}

// server is this binary as a server, in mode.
func server(mode string) ([]string, prebindtest.Option) {
	return []string{os.Args[0]}, prebindtest.Env("PREBINDTEST_SERVER=" + mode)
}

type answer struct {
	Pid       int
	Cwd       string
	Greeting  string
	ListenPid string `json:"listen_pid"`
}

func get(t testing.TB, url string) answer {
	t.Helper()
	client := http.Client{Timeout: timeout}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestStart(t *testing.T) {
	t.Parallel()
	argv, env := server("http")
	srv := prebindtest.Start(t, argv, env)
	if want := "http://127.0.0.1:" + strconv.Itoa(srv.Port); srv.URL != want || srv.Host != "127.0.0.1" {
		t.Fatalf("URL %q, Host %q, want %q", srv.URL, srv.Host, want)
	}
	// No waiting loop: the socket listens already.
	if a := get(t, srv.URL); a.Pid != srv.Pid || a.ListenPid != "" {
		t.Fatalf("answer %+v from pid %d: LISTEN_PID must be unset by Listener", a, srv.Pid)
	}
	if len(srv.Ports) != 1 || srv.Ports[0] != srv.Port || srv.PrebindPid == srv.Pid {
		t.Fatalf("Ports %v, PrebindPid %d, Pid %d", srv.Ports, srv.PrebindPid, srv.Pid)
	}
}

func TestListenEnvDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	argv, env := server("http")
	srv := prebindtest.Start(t, argv, env, prebindtest.Listen("web=0", "admin=0"),
		prebindtest.Env("GREETING=hello {admin.port}"), prebindtest.Dir(dir))
	if len(srv.Sockets) != 2 || srv.Sockets[1].Name != "admin" || srv.Ports[1] == srv.Port {
		t.Fatalf("sockets %+v", srv.Sockets)
	}
	a := get(t, srv.URL)
	if a.Greeting != fmt.Sprintf("hello %d", srv.Ports[1]) || a.Cwd != dir {
		t.Fatalf("answer %+v", a)
	}
}

func TestReadyLogAndOutput(t *testing.T) {
	t.Parallel()
	argv, env := server("http")
	srv := prebindtest.Start(t, argv, env, prebindtest.ReadyLog("^server: serving"))
	if !strings.Contains(srv.Output(), "server: serving") {
		t.Fatalf("output %q", srv.Output())
	}
}

func TestInterceptServersThatBindTheSamePort(t *testing.T) {
	t.Parallel()
	for i := 0; i < 3; i++ {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			argv, env := server("bind:18080")
			srv := prebindtest.Start(t, argv, env, prebindtest.Intercept(18080), prebindtest.ReadyHTTP("/"))
			if a := get(t, srv.URL); a.Pid != srv.Pid {
				t.Fatalf("answer %+v from pid %d", a, srv.Pid)
			}
		})
	}
}

func TestShare(t *testing.T) {
	t.Parallel()
	argv, env := server("http")
	name := fmt.Sprintf("prebindtest-share-%d", os.Getpid())
	a := prebindtest.Start(t, argv, env, prebindtest.Share(name))
	b := prebindtest.Start(t, argv, env, prebindtest.Share(name))
	if a.Pid != b.Pid || a.URL != b.URL || get(t, b.URL).Pid != a.Pid {
		t.Fatalf("two servers: %d at %s, %d at %s", a.Pid, a.URL, b.Pid, b.URL)
	}
}

func TestStopReturnsTheStatus(t *testing.T) {
	t.Parallel()
	argv, env := server("http")
	srv := prebindtest.Start(t, argv, env)
	if status, err := srv.Stop(); status != 128+int(syscall.SIGTERM) || err != nil {
		t.Fatalf("Stop: %d, %v", status, err)
	}
	if _, err := net.DialTimeout("tcp", srv.Host+":"+strconv.Itoa(srv.Port), timeout); err == nil {
		t.Fatal("still listening after Stop")
	}
}

// ---- failures: a testing.TB that records them --------------------------------

// recorder is a testing.TB that records failures instead of failing:
// Fatalf ends the goroutine as the real one does. The rest is t's.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	msgs     []string
	cleanups []func()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Cleanup(f func())                  { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Failed() bool                      { r.mu.Lock(); defer r.mu.Unlock(); return len(r.msgs) > 0 }
func (r *recorder) Logf(format string, args ...any)   {}

// failures runs f with a recorder, then its cleanups, and returns what
// failed: at start (Fatalf) or at cleanup (Errorf).
func failures(t *testing.T, f func(t testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return strings.Join(r.msgs, "\n")
}

func expect(t *testing.T, msg string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%q is not in the failure:\n%s", w, msg)
		}
	}
}

func TestMistypedCommandFailsAtStartWithPrebindsReason(t *testing.T) {
	t.Parallel()
	for _, argv := range [][]string{{"no-such-server-prebindtest"}, {"./no-such-server"}, {"/etc/passwd"}} {
		msg := failures(t, func(t testing.TB) {
			prebindtest.Start(t, argv)
			t.Errorf("Start returned")
		})
		expect(t, msg, "prebindtest: prebind exited without publishing", "the command was", "prebind: cannot run '"+argv[0]+"'")
		if strings.Contains(msg, "Start returned") {
			t.Errorf("%v: Start returned", argv)
		}
	}
}

func TestCrashAtStartFailsWithTheOutput(t *testing.T) {
	t.Parallel()
	msg := failures(t, func(t testing.TB) {
		prebindtest.Start(t, []string{"sh", "-c", "echo 'server: config missing' >&2; exit 3"},
			prebindtest.ReadyHTTP("/"))
	})
	expect(t, msg, "prebindtest: prebind exited without publishing", "exit status 3: the server exited with status 3",
		"| server: config missing", "prebind said:")
}

func TestWrongInterceptPortFailsWithPrebindsReason(t *testing.T) {
	t.Parallel()
	start := time.Now()
	msg := failures(t, func(t testing.TB) {
		argv, env := server("bind:18081")
		prebindtest.Start(t, argv, env, prebindtest.Intercept(18080), prebindtest.Timeout(time.Second))
	})
	expect(t, msg, "exit status 124", "did not claim port 18080")
	if took := time.Since(start); took > timeout {
		t.Errorf("took %v", took)
	}
}

func TestServerThatDiesFailsAtCleanup(t *testing.T) {
	t.Parallel()
	msg := failures(t, func(t testing.TB) {
		argv, env := server("http")
		srv := prebindtest.Start(t, argv, env)
		syscall.Kill(srv.Pid, syscall.SIGKILL)
		// Bounded: prebind exits as its server has.
		for deadline := time.Now().Add(timeout); syscall.Kill(srv.PrebindPid, 0) == nil && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	})
	expect(t, msg, "the server exited before it was stopped", "exit status 137: the server was killed by SIGKILL")
}

func TestPrebindNotFound(t *testing.T) {
	t.Setenv("PREBIND", "/nonexistent/prebind")
	msg := failures(t, func(t testing.TB) { prebindtest.Start(t, []string{"true"}) })
	expect(t, msg, "prebind not found", ".deb", "prebind-static", "PREBIND=")
}

func TestReservedArgs(t *testing.T) {
	msg := failures(t, func(t testing.TB) { prebindtest.Start(t, []string{"true"}, prebindtest.Args("--format=url")) })
	expect(t, msg, "sets --port-fd and --format=json itself")
}

// Every prebind option that prebindtest writes is one that prebind --help
// lists: a rename in prebind fails here, not in a user's test.
func TestOptionsArePrebinds(t *testing.T) {
	bin := os.Getenv("PREBIND")
	if bin == "" {
		bin = "prebind"
	}
	help, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatalf("%s --help: %v", bin, err)
	}
	for _, flag := range []string{"--port-fd=N", "--format=FORMAT", "--die-with-parent", "--kill-after=DURATION",
		"--ready-timeout=DURATION", "--listen=[NAME=]ADDRESS", "--intercept=[NAME=]PORT", "--ready-log=REGEX",
		"--ready-http[=PATH]", "--ready-exec=COMMAND", "--setenv=NAME[=VALUE]", "--share=NAME", "--group"} {
		if !strings.Contains(string(help), flag) {
			t.Errorf("prebind --help has no %s", flag)
		}
	}
}

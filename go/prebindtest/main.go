package prebindtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Main runs a package's tests as m.Run does, after setup has started
// what they share; then it stops it, and exits. In TestMain:
//
//	var srv *prebindtest.Server
//
//	func TestMain(m *testing.M) {
//		prebindtest.Main(m, func(t testing.TB) {
//			srv = prebindtest.Start(t, []string{prebindtest.Build(t, "./cmd/server")})
//		})
//	}
//
// setup's t is the package's: its Cleanup runs after every test, its
// Fatalf ends the run before any test with the message (exit status 1),
// and an Errorf in a cleanup (a server that died) fails the run.
func Main(m *testing.M, setup func(t testing.TB)) {
	tb := &mainTB{}
	tb.run(func() { setup(tb) })
	code := 0
	switch {
	case tb.Failed():
		code = 1
	case !tb.Skipped():
		code = m.Run()
	}
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.run(tb.cleanups[i])
	}
	if tb.Failed() && code == 0 {
		fmt.Fprintln(os.Stderr, "FAIL: TestMain (prebindtest.Main)")
		code = 1
	}
	os.Exit(code)
}

// mainTB is the testing.TB of Main's setup. The embedded interface is
// nil: it only provides testing.TB's unexported method; every exported
// one is defined below.
type mainTB struct {
	testing.TB
	mu       sync.Mutex
	failed   bool
	skipped  bool
	cleanups []func()
}

// run runs f in a goroutine of its own, which FailNow and SkipNow end.
func (tb *mainTB) run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func (tb *mainTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

func (tb *mainTB) Error(args ...any)                 { tb.Log(args...); tb.Fail() }
func (tb *mainTB) Errorf(format string, args ...any) { tb.Logf(format, args...); tb.Fail() }
func (tb *mainTB) Fatal(args ...any)                 { tb.Log(args...); tb.FailNow() }
func (tb *mainTB) Fatalf(format string, args ...any) { tb.Logf(format, args...); tb.FailNow() }
func (tb *mainTB) Skip(args ...any)                  { tb.Log(args...); tb.SkipNow() }
func (tb *mainTB) Skipf(format string, args ...any)  { tb.Logf(format, args...); tb.SkipNow() }
func (tb *mainTB) FailNow()                          { tb.Fail(); runtime.Goexit() }
func (tb *mainTB) Helper()                           {}
func (tb *mainTB) Name() string                      { return "TestMain" }
func (tb *mainTB) Log(args ...any)                   { tb.Logf("%s", fmt.Sprintln(args...)) }

func (tb *mainTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "TestMain: %s\n", strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

func (tb *mainTB) Fail() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.failed = true
}

func (tb *mainTB) Failed() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.failed
}

// SkipNow skips the package: no test runs, and the run passes.
func (tb *mainTB) SkipNow() {
	tb.mu.Lock()
	tb.skipped = true
	tb.mu.Unlock()
	runtime.Goexit()
}

func (tb *mainTB) Skipped() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.skipped
}

func (tb *mainTB) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	os.Setenv(key, value)
	tb.Cleanup(func() {
		if had {
			os.Setenv(key, old)
		} else {
			os.Unsetenv(key)
		}
	})
}

func (tb *mainTB) TempDir() string {
	dir, err := os.MkdirTemp("", "prebindtest-main-")
	if err != nil {
		tb.Fatalf("prebindtest: TempDir: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Build builds the main package pkg ("./cmd/server", or an import path)
// with the go command that runs the test, into t.TempDir(), and returns
// the binary's path. Run the binary itself under prebind, not `go run`:
// its pid must be the one prebind sets in LISTEN_PID.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	name := path.Base(pkg)
	if name == "." || name == ".." || name == "/" {
		name = "server"
	}
	bin := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool(), "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("prebindtest: go build -o %s %s: %v\n%s", bin, pkg, err, out)
	}
	return bin
}

// goTool is the go command of the toolchain that built this test.
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// prebind starts from one OS thread that lives as long as the test binary:
// --die-with-parent is PR_SET_PDEATHSIG, which fires when the thread that
// forked prebind exits, not the process, and the Go runtime ends the
// threads of goroutines that exit locked to them.
var starter struct {
	once sync.Once
	reqs chan startRequest
}

type startRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func startOnLockedThread(cmd *exec.Cmd) error {
	starter.once.Do(func() {
		starter.reqs = make(chan startRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives on
			dieWithGoTest()
			for r := range starter.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	starter.reqs <- startRequest{cmd, done}
	return <-done
}

// dieWithGoTest makes the test binary die with `go test`, its parent: a
// killed go command (kill -9, a CI job's timeout) would leave the binary
// running its tests and their servers, with nobody to read its output.
// Its death then reaches prebind through --die-with-parent. Only under go
// test (which always passes -test.paniconexit0), on this thread, which
// never exits: the kernel sends the signal if one of the process's threads
// asked for it.
func dieWithGoTest() {
	for _, a := range os.Args[1:] {
		if a == "-test.paniconexit0" {
			syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
			return
		}
	}
}

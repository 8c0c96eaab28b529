package prebindtest_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A package whose TestMain server fails at start, and one whose server
// dies while its tests run.
const (
	mainFailsAtStart = `package p

import (
	"testing"

	"github.com/prebind/prebind/go/prebindtest"
)

func TestMain(m *testing.M) {
	prebindtest.Main(m, func(t testing.TB) {
		prebindtest.Start(t, []string{"sh", "-c", "echo 'server: no config' >&2; exit 3"}, prebindtest.ReadyHTTP("/"))
	})
}

func TestNeverRuns(t *testing.T) { t.Log("a test ran") }
`
	mainServerDies = `package p

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prebind/prebind/go/prebindtest"
)

var srv *prebindtest.Server

func TestMain(m *testing.M) {
	prebindtest.Main(m, func(t testing.TB) { srv = prebindtest.Start(t, []string{"sleep", "1000"}) })
}

// kill(2) returns before the process has gone: wait until it is a zombie
// (or reaped), as a server that crashed a while ago is.
func TestKillTheServer(t *testing.T) {
	syscall.Kill(srv.Pid, syscall.SIGKILL)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", srv.Pid))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
	}
	t.Fatal("the server did not die")
}
`
	// go test -timeout=10s: Start must fail before the test binary panics,
	// with prebind's reason (it gets --ready-timeout to fit).
	startsTooLate = `package p

import (
	"testing"

	"github.com/prebind/prebind/go/prebindtest"
)

func TestNeverReady(t *testing.T) {
	prebindtest.Start(t, []string{"sh", "-c", "echo 'server: waiting for the database'; exec sleep 1000"},
		prebindtest.ReadyLog("^never"))
}
`
)

// Main fails the run: before any test if the server does not start, after
// them if it died, with prebind's reason either way.
func TestMainFailsTheRunWithTheReason(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not with -short")
	}
	t.Parallel()
	dir := module(t, map[string]string{"start/p_test.go": mainFailsAtStart, "dies/p_test.go": mainServerDies,
		"late/p_test.go": startsTooLate})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	gotest := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "test", "-count=1", "-v", "-timeout=10s", "./...")
	gotest.Dir = dir
	out, err := gotest.CombinedOutput()
	text := string(out)
	if err == nil || strings.Contains(text, "a test ran") || strings.Contains(text, "panic: test timed out") {
		t.Fatalf("go test: %v\n%s", err, text)
	}
	for _, want := range []string{
		"TestMain: prebindtest: prebind exited without publishing", "exit status 3: the server exited with status 3",
		"| server: no config", "FAIL\tcheck/start",
		"--- PASS: TestKillTheServer", "TestMain: prebindtest: the server exited before it was stopped",
		"exit status 137: the server was killed by SIGKILL", "FAIL: TestMain (prebindtest.Main)", "FAIL\tcheck/dies",
		"exit status 124: not ready in time", "| server: waiting for the database", "--- FAIL: TestNeverReady",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%q is not in go test's output:\n%s", want, text)
		}
	}
}

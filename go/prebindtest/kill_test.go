package prebindtest_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A module of 4 packages whose tests each hold a server per package (Main)
// and one per test (Start), say so, and wait.
const holdTest = `package p

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/prebind/prebind/go/prebindtest"
)

var shared *prebindtest.Server

func TestMain(m *testing.M) {
	prebindtest.Main(m, func(t testing.TB) { shared = prebindtest.Start(t, []string{"sleep", "1000"}) })
}

func TestHold(t *testing.T) {
	srv := prebindtest.Start(t, []string{"sleep", "1000"})
	conn, err := net.Dial("tcp", os.Getenv("KILLCHECK_REPORT"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "%d %d %d %d %d %d %d\n", os.Getpid(), shared.PrebindPid, shared.Pid, shared.Port,
		srv.PrebindPid, srv.Pid, srv.Port)
	conn.Close()
	time.Sleep(time.Hour)
}
`

// kill -9 of go test: soon no test binary, prebind or server is left, no
// port listens and the test binaries' TMPDIR is empty. About a second
// here (logged); what fails is anything left after 20 s, a bound a loaded
// machine does not reach, where nothing dies with go test.
func TestKillGoTestLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not with -short")
	}
	files := map[string]string{}
	for i := 1; i <= 4; i++ {
		files[fmt.Sprintf("p%d/hold_test.go", i)] = holdTest
	}
	dir := module(t, files)
	for _, d := range []string{"tmp", "gotmp"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	report, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close()
	log, _ := os.Create(filepath.Join(dir, "gotmp", "log"))
	defer log.Close()
	gotest := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "test", "-count=1", "-p", "4", "-timeout=5m", "./...")
	gotest.Dir, gotest.Stdout, gotest.Stderr = dir, log, log
	gotest.Env = append(os.Environ(), "TMPDIR="+filepath.Join(dir, "tmp"), "GOTMPDIR="+filepath.Join(dir, "gotmp"),
		"KILLCHECK_REPORT="+report.Addr().String())
	if err := gotest.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- gotest.Wait() }()
	defer func() {
		gotest.Process.Kill()
		<-exited
	}()
	fail := func(format string, args ...any) {
		out, _ := os.ReadFile(log.Name())
		t.Fatalf(format+"\ngo test's output:\n%s", append(args, out)...)
	}

	// Every package's report: the test binary, its two prebinds and servers.
	var pids []int
	var ports []string
	// Whatever a failure leaves, the test does not: the processes it saw.
	defer func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	reports := make(chan string)
	go func() {
		for {
			conn, err := report.Accept()
			if err != nil {
				return
			}
			conn.SetDeadline(time.Now().Add(time.Minute))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			reports <- line
		}
	}()
	for i := 0; i < 4; i++ {
		var line string
		select {
		case line = <-reports:
		case err := <-exited:
			exited <- err
			fail("go test exited (%v) after %d of 4 packages reported", err, i)
		case <-time.After(4 * time.Minute):
			fail("%d of 4 packages reported within 4 minutes", i)
		}
		var p [5]int
		var port [2]string
		fmt.Sscan(line, &p[0], &p[1], &p[2], &port[0], &p[3], &p[4], &port[1])
		pids = append(pids, p[:]...)
		ports = append(ports, port[:]...)
	}

	gotest.Process.Kill()
	<-exited
	exited <- nil
	var left []string
	killed := time.Now()
	for deadline := killed.Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = leftovers(pids, ports, filepath.Join(dir, "tmp"))
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("20 s after kill -9 of go test: %s", strings.Join(left, ", "))
	}
	t.Logf("kill -9 of go test: nothing left after %v", time.Since(killed).Round(time.Millisecond))
}

// module writes a Go module that uses this checkout's prebindtest, with
// files (path: text), in a temporary directory, and returns it.
func module(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	here, _ := os.Getwd()
	files["go.mod"] = fmt.Sprintf("module check\n\ngo 1.19\n\nrequire github.com/prebind/prebind/go v0.0.0\n\n"+
		"replace github.com/prebind/prebind/go => %s\n", filepath.Dir(here))
	for name, text := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func leftovers(pids []int, ports []string, tmp string) []string {
	var left []string
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// A zombie has released everything; its reaper may be slow.
		if err == nil && !strings.Contains(string(stat), ") Z ") {
			left = append(left, fmt.Sprintf("pid %d", pid))
		}
	}
	for _, port := range ports {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			conn.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			left = append(left, "port "+port+" listening")
		}
	}
	if names, _ := os.ReadDir(tmp); len(names) > 0 {
		left = append(left, fmt.Sprintf("%d files in TMPDIR", len(names)))
	}
	return left
}

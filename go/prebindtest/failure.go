package prebindtest

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
)

// Lines of output shown in a failure, found in its last tailBytes.
const (
	tailLines = 20
	tailBytes = 64 * 1024
)

// failure is the message of a start or a server that failed, as the
// pytest plugin writes it: what happened, prebind's exit status and what
// it means, the command, prebind's own lines, then the last lines of
// output. status < 0 is a signal that killed prebind; nil: unknown (we
// stopped it ourselves).
func failure(headline string, argv []string, status *int, output string) string {
	var b strings.Builder
	b.WriteString("prebindtest: " + headline)
	if status != nil {
		fmt.Fprintf(&b, "\n  exit status %d: %s", *status, describeStatus(*status))
	}
	b.WriteString("\n  command: " + shellJoin(argv))
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	if output == "" {
		lines = nil
	}
	var own []string
	for _, l := range lines {
		if strings.HasPrefix(l, "prebind:") {
			own = append(own, l)
		}
	}
	if len(own) > 0 {
		b.WriteString("\n  prebind said:")
		for _, l := range own[max(0, len(own)-5):] {
			b.WriteString("\n    " + shorten(l))
		}
	}
	if len(lines) == 0 {
		b.WriteString("\n  (no output)")
		return b.String()
	}
	lines = lines[max(0, len(lines)-tailLines):]
	fmt.Fprintf(&b, "\n  last %d lines of output (prebind's and the server's):", len(lines))
	for _, l := range lines {
		b.WriteString("\n    | " + shorten(l))
	}
	return b.String()
}

// describeStatus says what an exit status of prebind means (prebind(1),
// EXIT STATUS).
func describeStatus(status int) string {
	switch {
	case status < 0:
		return "prebind was killed by " + signalName(-status)
	case status == 0:
		return "the server exited successfully"
	case status == 124:
		return "not ready in time (or an intercepted port was never claimed)"
	case status == 125:
		return "prebind itself failed (bad usage, bind error, ...)"
	case status == 126:
		return "the command was found but could not be run"
	case status == 127:
		return "the command was not found"
	case status > 128:
		return "the server was killed by " + signalName(status-128)
	}
	return fmt.Sprintf("the server exited with status %d", status)
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
}

func signalName(n int) string {
	if name, ok := signalNames[syscall.Signal(n)]; ok {
		return name
	}
	return fmt.Sprintf("signal %d", n)
}

func shorten(line string) string {
	const width = 300
	if len(line) <= width {
		return line
	}
	return fmt.Sprintf("%s... (%d more bytes)", line[:width], len(line)-width)
}

var plain = regexp.MustCompile(`^[A-Za-z0-9_./=:,@%+-]+$`)

// shellJoin quotes argv as a shell would need, to be pasted and rerun.
func shellJoin(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		if plain.MatchString(a) {
			quoted[i] = a
		} else {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

package prebindtest

import (
	"fmt"
	"strings"
	"time"
)

// An Option is a prebind option, or a setting of the way Start runs it.
// The names are the pytest plugin's (python/): listen, intercept,
// ready_log, ready_http, ready_exec, share, timeout.
type Option func(*config)

type config struct {
	args        []string      // prebind options, in the order given
	dir         string        // prebind's (so the server's) working directory
	timeout     time.Duration // for publication; 0: the default
	stopTimeout time.Duration // --kill-after
	waitsReady  bool          // prebind publishes only once a condition holds
	err         error         // a misused option, reported by Start
}

const (
	defaultTimeout     = 60 * time.Second
	defaultStopTimeout = 5 * time.Second
	// prebind's own default --ready-timeout (prebind(1)).
	prebindReadyTimeout = 90 * time.Second
	// How long prebind may take beyond its own bounds before it is
	// killed, and the bound on every wait after a SIGKILL.
	grace = 5 * time.Second
)

// Listen adds sockets (-l): "0" (the default, a free port on 127.0.0.1),
// "web=0", "[::1]:0", "/path/to/sock", "@abstract".
func Listen(addrs ...string) Option {
	return func(c *config) {
		for _, a := range addrs {
			c.args = append(c.args, "--listen="+a)
		}
	}
}

// Intercept gives the server's own bind() of port the first socket
// (--intercept): a server that knows nothing of prebind runs as it is,
// and Start returns once it has claimed the port.
func Intercept(port int) Option {
	return func(c *config) {
		c.args = append(c.args, fmt.Sprintf("--intercept=%d", port))
		c.waitsReady = true
	}
}

// ReadyLog publishes once a line of the server's output matches regex
// (--ready-log, POSIX extended).
func ReadyLog(regex string) Option {
	return func(c *config) {
		c.args = append(c.args, "--ready-log="+regex)
		c.waitsReady = true
	}
}

// ReadyHTTP publishes once GET path on the first socket answers 2xx or
// 3xx (--ready-http; "" is "/").
func ReadyHTTP(path string) Option {
	return func(c *config) {
		if path == "" {
			path = "/"
		}
		c.args = append(c.args, "--ready-http="+path)
		c.waitsReady = true
	}
}

// ReadyExec publishes once command (sh -c, templates such as {port}
// expanded) exits 0 (--ready-exec).
func ReadyExec(command string) Option {
	return func(c *config) {
		c.args = append(c.args, "--ready-exec="+command)
		c.waitsReady = true
	}
}

// Env adds NAME=VALUE variables to the server's environment (-E):
// "BASE_URL={url}" expands to the first socket's URL, {port}, {web.url}...
// as prebind(1) says. A bare NAME copies the test's own value.
func Env(vars ...string) Option {
	return func(c *config) {
		for _, v := range vars {
			c.args = append(c.args, "--setenv="+v)
		}
	}
}

// Dir runs prebind, and so the server, in dir.
func Dir(dir string) Option {
	return func(c *config) { c.dir = dir }
}

// Timeout bounds the start: how long Start waits for prebind to publish
// (default 60s). With a ready option or Intercept, prebind gets it as
// --ready-timeout (default 90s), so that it stops the server and says
// why itself; Start then waits 5s more.
func Timeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.err = fmt.Errorf("Timeout(%v): must be positive", d)
		}
		c.timeout = d
	}
}

// StopTimeout is how long the server has to exit after SIGTERM before
// prebind kills it (--kill-after; default 5s).
func StopTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.err = fmt.Errorf("StopTimeout(%v): must be positive", d)
		}
		c.stopTimeout = d
	}
}

// Share runs one server for every Start with the same name, command and
// options, in any process of this user: every package of `go test ./...`
// uses one server, started by the first and stopped a second after the
// last has let go (--share).
func Share(name string) Option {
	return func(c *config) { c.args = append(c.args, "--share="+name) }
}

// Group runs the server in its own process group and signals the whole
// group (--group): for a wrapper such as sh -c that starts the real server.
func Group() Option {
	return func(c *config) { c.args = append(c.args, "--group") }
}

// Args passes other prebind options as they are, before "--":
// Args("--restart=on-failure", "--reuseport").
func Args(args ...string) Option {
	return func(c *config) {
		for _, a := range args {
			if flag := strings.SplitN(a, "=", 2)[0]; flag == "--port-fd" || flag == "--format" {
				c.err = fmt.Errorf("Args(%q): prebindtest sets --port-fd and --format=json itself", a)
			}
		}
		c.args = append(c.args, args...)
	}
}

func newConfig(opts []Option) *config {
	c := &config{stopTimeout: defaultStopTimeout}
	for _, o := range opts {
		o(c)
	}
	return c
}

// prebindArgs are prebind's options: the port fd and JSON first, a death
// signal, the kill grace, then the options given.
func (c *config) prebindArgs() []string {
	args := []string{"--port-fd=3", "--format=json", "--die-with-parent", "--kill-after=" + duration(c.stopTimeout)}
	if c.waitsReady && c.timeout > 0 {
		args = append(args, "--ready-timeout="+duration(c.timeout))
	}
	return append(args, c.args...)
}

// wait is how long Start waits for publication.
func (c *config) wait() time.Duration {
	switch {
	case c.waitsReady && c.timeout > 0:
		return c.timeout + grace
	case c.waitsReady:
		return prebindReadyTimeout + grace
	case c.timeout > 0:
		return c.timeout
	}
	return defaultTimeout
}

// duration is d in prebind's syntax.
func duration(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	if ms := d.Milliseconds(); ms > 0 {
		return fmt.Sprintf("%dms", ms)
	}
	return "1ms"
}

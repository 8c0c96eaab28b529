//! Starts the server through prebind and talks to it.
//!
//!     PREBIND=/path/to/prebind cargo test --offline
//!
//! The URL is the first line of prebind's stdout (`--print=url`); prebind
//! writes it before the server runs. The server's own stdout follows on the
//! same pipe, so a thread keeps draining it.

use std::env;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The bound on every wait.
const TIMEOUT: Duration = Duration::from_secs(20);

/// The server binary, built by cargo for integration tests.
const SERVER: &str = env!("CARGO_BIN_EXE_prebind-example-rust");

extern "C" {
    // libc's kill(2), linked by std anyway: std's Child::kill() sends
    // SIGKILL, which prebind cannot forward (it would die, and leave the
    // server running). SIGTERM is forwarded.
    fn kill(pid: i32, sig: i32) -> i32;
}
const SIGTERM: i32 = 15;

fn prebind() -> String {
    // $PREBIND, or prebind on PATH.
    env::var("PREBIND").unwrap_or_else(|_| "prebind".into())
}

/// A server running under prebind; stopped with SIGTERM when dropped.
struct Server {
    child: Child,
    url: String,
    status: Option<ExitStatus>,
}

impl Server {
    fn start(prebind_args: &[&str], command: &[&str]) -> Server {
        let mut child = Command::new(prebind())
            // Not --die-with-parent here: its signal fires when the thread
            // that started prebind exits, and cargo test runs every test in
            // a thread of its own. (Fine for one test's own server; not for
            // a server shared between tests.)
            .arg("--print=url")
            .args(prebind_args)
            .arg("--")
            .args(command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot run prebind: set PREBIND or put prebind on PATH");

        // Read the first line in a thread, then keep draining: the reader
        // must not stop while the server may still write.
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = match rx.recv_timeout(TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("prebind printed no URL within {:?}", TIMEOUT);
            }
        };
        if line.is_empty() {
            panic!("prebind exited {:?} without publishing", child.wait());
        }
        Server {
            child,
            url: line.trim_end().to_string(),
            status: None,
        }
    }

    fn addr(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    /// SIGTERM to prebind, which forwards it; prebind's exit status.
    fn stop(&mut self) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        unsafe { kill(self.child.id() as i32, SIGTERM) };
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.status = Some(status);
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the server did not stop within {:?} of SIGTERM", TIMEOUT);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.stop();
        }
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    write!(
        stream,
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        path, addr
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200 "), "{}", response);
    response.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
}

#[test]
fn answers_through_prebind() {
    // --success-status=143: the server dies of SIGTERM, which is its way
    // of stopping; report that as success, as tini's -e 143 does.
    let mut server = Server::start(&["--success-status=143"], &[SERVER]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    // No waiting loop: the socket listens already, the kernel queues us.
    let body = get(server.addr(), "/hello");
    assert!(body.starts_with("rust pid="), "{}", body);
    assert!(body.ends_with(" path=/hello\n"), "{}", body);
    assert_eq!(server.stop().code(), Some(0));
}

#[test]
fn sigterm_status_is_passed_on() {
    let mut server = Server::start(&[], &[SERVER]);
    get(server.addr(), "/");
    // Killed by SIGTERM: prebind exits 128 + 15, as a shell reports it.
    assert_eq!(server.stop().code(), Some(128 + SIGTERM));
}

#[test]
fn many_servers_at_once() {
    let servers: Vec<Server> = (0..6)
        .map(|_| Server::start(&["--success-status=143"], &[SERVER]))
        .collect();
    let mut urls: Vec<&str> = servers.iter().map(|s| s.url.as_str()).collect();
    urls.sort_unstable();
    urls.dedup();
    assert_eq!(urls.len(), servers.len());
    let pids: Vec<String> = servers.iter().map(|s| get(s.addr(), "/")).collect();
    let mut distinct = pids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), servers.len(), "{:?}", pids);
}

#[test]
fn a_wrapper_without_exec_breaks_listen_pid() {
    // `sh -c 'server; ...'` (or cargo run) makes the server a grandchild:
    // LISTEN_PID is not its pid, and it refuses the socket.
    let script = format!("'{}'; exit $?", SERVER);
    let mut server = Server::start(&[], &["sh", "-c", &script]);
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the server did not give up");
        thread::sleep(Duration::from_millis(10));
    };
    server.status = Some(status);
    assert_eq!(status.code(), Some(1));
}

//! An HTTP server that never binds: it takes its listening socket from
//! prebind (or systemd) as fd 3, with the standard library only.
//!
//!     cargo build && prebind --print=url -- target/debug/prebind-example-rust
//!
//! It has no SIGTERM handler (std has none), so SIGTERM, forwarded by
//! prebind, kills it: prebind then exits 143 (128 + 15), or 0 with
//! `--success-status=143`.

use std::env;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::io::FromRawFd;
use std::process;
use std::thread;
use std::time::Duration;

/// SD_LISTEN_FDS_START: the first passed socket.
const LISTEN_FDS_START: i32 = 3;

/// The first socket passed by socket activation, read as sd_listen_fds(3)
/// does: LISTEN_PID must be our pid, or the socket was meant for another
/// process (a wrapper such as `sh -c` or `cargo run` sits in between).
fn take_listener() -> Result<TcpListener, String> {
    let pid = env::var("LISTEN_PID").unwrap_or_default();
    if pid != process::id().to_string() {
        return Err(format!(
            "LISTEN_PID={:?} is not my pid {}: run me directly or with exec, not through cargo run",
            pid,
            process::id()
        ));
    }
    let fds: u32 = env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    if fds < 1 {
        return Err("no sockets passed (LISTEN_FDS)".into());
    }
    // The variables are ours alone: processes we start must not take them.
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        env::remove_var(name);
    }
    // SAFETY: fd 3 is the listening socket that LISTEN_FDS promised us, and
    // nothing else in this process owns it.
    let inherited = unsafe { TcpListener::from_raw_fd(LISTEN_FDS_START) };
    // The fd arrives without close-on-exec; the receiver sets it. std's
    // try_clone() dups with F_DUPFD_CLOEXEC; dropping the original closes fd 3.
    inherited.try_clone().map_err(|e| format!("fd 3: {}", e))
}

fn serve(stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Read the rest of the header, up to the empty line.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let body = format!("rust pid={} path={}\n", process::id(), path);
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        body.len(),
        body
    )?;
    stream.flush()
}

fn main() {
    let listener = match take_listener() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("prebind-example-rust: {}", e);
            process::exit(1);
        }
    };
    for stream in listener.incoming() {
        match stream {
            Ok(s) => {
                thread::spawn(move || {
                    if let Err(e) = serve(s) {
                        eprintln!("prebind-example-rust: {}", e);
                    }
                });
            }
            Err(e) => eprintln!("prebind-example-rust: accept: {}", e),
        }
    }
}

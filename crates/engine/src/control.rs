//! The control socket: a Unix socket answering one JSON request per line with one JSON
//! line. Requests: `{"cmd":"status"}`, `{"cmd":"detach"}`,
//! `{"cmd":"reconfigure","plan":"<plan.json text>"}`. Replies carry `"ok": true` and the
//! result, or `"ok": false` and `"error"`.

use crate::engine::Engine;
use reblock_layout::Plan;
use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest request line read, newline included: a request is refused past it, so an
/// endless line costs at most this much memory (a plan.json for a large image fits).
pub const MAX_REQUEST_LINE_BYTES: u64 = 64 << 20;

pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Answers one request.
pub fn handle(engine: &Engine, req: &Value) -> Value {
    let cmd = req.get("cmd").and_then(Value::as_str).unwrap_or("");
    let r: Result<Value, String> = match cmd {
        "status" => serde_json::to_value(engine.status()).map_err(|e| e.to_string()),
        "detach" => engine
            .detach()
            .map(|moved| json!({ "bytes_moved": moved, "status": engine.status() }))
            .map_err(|e| format!("detach: {e}")),
        "reconfigure" => match req.get("plan").and_then(Value::as_str) {
            None => Err("reconfigure: key \"plan\" (the plan.json text) is missing".into()),
            Some(text) => Plan::from_json(text, "plan")
                .map_err(|e| e.to_string())
                .and_then(|plan| engine.reconfigure(plan).map_err(|e| e.to_string()))
                .map(|s| json!({ "steps": engine.status().reconfiguration.steps_total, "bytes_to_move": s.bytes_moved })),
        },
        other => Err(format!("unknown command {other:?} (status, detach, reconfigure)")),
    };
    match r {
        Ok(v) => json!({ "ok": true, "result": v }),
        Err(e) => json!({ "ok": false, "error": e }),
    }
}

impl ControlServer {
    /// Listens on `path` (a stale socket file from a dead server is replaced). The socket
    /// file is 0600 whatever the umask: it can detach and reconfigure.
    pub fn start(path: &Path, engine: Arc<Engine>) -> io::Result<ControlServer> {
        if path.exists() && UnixStream::connect(path).is_err() {
            std::fs::remove_file(path)?;
        }
        let listener: UnixListener = reblock_nbd::bind_unix(path, 0o600)?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            let e = engine.clone();
                            std::thread::spawn(move || serve_conn(s, &e));
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        Err(e) => tracing::warn!(error = %e, "control accept"),
                    }
                }
            })?;
        Ok(ControlServer {
            path: path.to_owned(),
            stop,
            thread: Some(thread),
        })
    }

    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_conn(s: UnixStream, engine: &Engine) {
    let _ = s.set_nonblocking(false);
    let mut w = match s.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut r = BufReader::new(s);
    loop {
        // A Vec grows by doubling: a line kept under the bound keeps its capacity there too.
        let mut line = Vec::new();
        match (&mut r)
            .take(MAX_REQUEST_LINE_BYTES)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(_) if line.last() != Some(&b'\n') && line.len() as u64 >= MAX_REQUEST_LINE_BYTES => {
                let why = format!("request line longer than {MAX_REQUEST_LINE_BYTES} bytes");
                let _ = writeln!(w, "{}", json!({ "ok": false, "error": why }));
                return;
            }
            Ok(_) => {}
        }
        let reply = match serde_json::from_slice::<Value>(&line) {
            Ok(req) => handle(engine, &req),
            Err(e) => json!({ "ok": false, "error": format!("request is not JSON: {e}") }),
        };
        if writeln!(w, "{reply}").is_err() {
            return;
        }
    }
}

/// Why a control request got no result.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{}: cannot reach the server's control socket: {source}", path.display())]
    Connect { path: PathBuf, source: io::Error },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: bad reply {line:?}: {source}", path.display())]
    BadReply {
        path: PathBuf,
        line: String,
        source: serde_json::Error,
    },
    /// The server answered with an error (its message).
    #[error("{0}")]
    Refused(String),
}

/// Sends one request to a control socket and returns the `result` (or the error).
pub fn request(path: &Path, req: &Value) -> Result<Value, ControlError> {
    let s = UnixStream::connect(path).map_err(|source| ControlError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    let io_err = |source| ControlError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut w = s.try_clone().map_err(io_err)?;
    writeln!(w, "{req}").map_err(io_err)?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).map_err(io_err)?;
    let v: Value = serde_json::from_str(&line).map_err(|source| ControlError::BadReply {
        path: path.to_path_buf(),
        line: line.clone(),
        source,
    })?;
    if v.get("ok") == Some(&Value::Bool(true)) {
        Ok(v.get("result").cloned().unwrap_or(Value::Null))
    } else {
        Err(ControlError::Refused(
            v.get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown error")
                .to_owned(),
        ))
    }
}
